/**
 * What the sync engine last committed to one table: the fragments (base plus
 * one per service port) and global indices over them — chains by name, named
 * sets/maps by name, and elements by {@link elementId} with an ownership
 * count (several fragments may own the same element, e.g. a ClusterIP shared
 * by two ports in `cluster-ips`).
 *
 * The indices are what the planner diffs against; the fragments say which
 * chains/sets/elements a service owned, so a partial sync can drop them.
 *
 * @module
 */
import type { Chain, Map as NftMap, Set as NftSet } from "../ffi/nftables/types.ts";
import { elementId, type ElementSpec, type Fragment } from "./fragment.ts";

/** Fragment id of the static skeleton (cannot collide with `ns/name:port` ids). */
export const BASE_ID = "\u0000base";

/** A chain as written. `rules === null` means "content unknown": rewrite it. */
export interface ChainRecord {
  chain: Chain;
  rules: readonly string[] | null;
}

/**
 * An element as written, with the number of fragments that own it and the
 * fragment whose value (for map elements) is the one written. Owners
 * normally agree; when they do not (e.g. two Services claiming one NodePort),
 * the last writer wins, and when it leaves another owner's value is written.
 */
export interface ElementRecord {
  spec: ElementSpec;
  refs: number;
  owner?: string;
}

/** A named set or map declaration with its owner count. */
export interface SetRecord {
  spec: NftSet | NftMap;
  refs: number;
}

/** The committed state of one table. Mutated only by committing a plan. */
export class WrittenState {
  /** Fragments by id ({@link BASE_ID} for the skeleton). */
  readonly fragments: Map<string, Fragment> = new Map();
  /** Every chain we believe exists, by name. */
  readonly chains: Map<string, ChainRecord> = new Map();
  /** Every named set/map we believe exists, by name. */
  readonly sets: Map<string, SetRecord> = new Map();
  /** Every element we believe exists, by {@link elementId}. */
  readonly elements: Map<string, ElementRecord> = new Map();
  /**
   * Chains flushed and unreferenced, waiting to be deleted: name -> time
   * (ms, the engine's clock) they were flushed. See sync_plan.ts for why the
   * deletion is delayed.
   */
  readonly staleChains: Map<string, number> = new Map();
  /** contextKey() of the build context the fragments were built with. */
  contextKey: string | undefined;

  /** True when nothing has been written (cold start, or after the table vanished). */
  get empty(): boolean {
    return this.fragments.size === 0 && this.chains.size === 0 && this.elements.size === 0;
  }

  /** Forgets everything, e.g. when the table was found missing. */
  clear(): void {
    this.fragments.clear();
    this.chains.clear();
    this.sets.clear();
    this.elements.clear();
    this.staleChains.clear();
    this.contextKey = undefined;
  }

  /**
   * Another owner's spec of element `id`, skipping fragment ids in `except`
   * and using `pending` fragments over written ones. O(all elements): only
   * needed when owners disagree on a value.
   */
  findOwner(
    id: string,
    except: ReadonlySet<string>,
    pending: ReadonlyMap<string, Fragment | null>,
  ): { owner: string; spec: ElementSpec } | undefined {
    const search = (fid: string, f: Fragment) => {
      for (const e of f.elements) if (elementId(e) === id) return { owner: fid, spec: e };
      return undefined;
    };
    for (const [fid, f] of pending) {
      if (f === null || except.has(fid)) continue;
      const hit = search(fid, f);
      if (hit) return hit;
    }
    for (const [fid, f] of this.fragments) {
      if (except.has(fid) || pending.has(fid)) continue;
      const hit = search(fid, f);
      if (hit) return hit;
    }
    return undefined;
  }

  /** Elements of one set or map, by id. O(elements): used on full syncs only. */
  elementsOf(target: string): Map<string, ElementRecord> {
    const out = new Map<string, ElementRecord>();
    for (const [id, rec] of this.elements) if (rec.spec.target === target) out.set(id, rec);
    return out;
  }
}

/** The indices a set of fragments implies, built from scratch (full sync). */
export interface Indices {
  chains: Map<string, ChainRecord>;
  sets: Map<string, SetRecord>;
  elements: Map<string, ElementRecord>;
}

/** Builds chain/set/element indices (with ownership counts) from fragments by id. */
export function indexFragments(fragments: Iterable<[string, Fragment]>): Indices {
  const chains = new Map<string, ChainRecord>();
  const sets = new Map<string, SetRecord>();
  const elements = new Map<string, ElementRecord>();
  for (const [owner, f] of fragments) {
    for (const c of f.chains) chains.set(c.chain.name, { chain: c.chain, rules: c.rules });
    for (const s of f.sets) {
      const rec = sets.get(s.name);
      if (rec === undefined) sets.set(s.name, { spec: s, refs: 1 });
      else rec.refs++;
    }
    for (const e of f.elements) {
      const id = elementId(e);
      const rec = elements.get(id);
      if (rec === undefined) elements.set(id, { spec: e, refs: 1, owner });
      else {
        rec.refs++;
        rec.spec = e;
        rec.owner = owner;
      }
    }
  }
  return { chains, sets, elements };
}

function sameStrings(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Deep equality of two fragments (chains with rules, sets, elements with
 * values and comments). A full sync keeps the old object when the rebuilt
 * one is equal, so the rebuilt copy is garbage at once (lower peak memory).
 */
export function sameFragment(a: Fragment, b: Fragment): boolean {
  if (
    a.chains.length !== b.chains.length || a.sets.length !== b.sets.length ||
    a.elements.length !== b.elements.length
  ) return false;
  for (let i = 0; i < a.chains.length; i++) {
    const x = a.chains[i], y = b.chains[i];
    if (x.chain.name !== y.chain.name || !sameStrings(x.rules, y.rules)) return false;
    if (JSON.stringify(x.chain) !== JSON.stringify(y.chain)) return false;
  }
  for (let i = 0; i < a.sets.length; i++) {
    if (JSON.stringify(a.sets[i]) !== JSON.stringify(b.sets[i])) return false;
  }
  for (let i = 0; i < a.elements.length; i++) {
    const x = a.elements[i], y = b.elements[i];
    if (
      x.target !== y.target || x.comment !== y.comment || !sameStrings(x.key, y.key) ||
      !sameStrings(x.value, y.value)
    ) return false;
  }
  return true;
}
