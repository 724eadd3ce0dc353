/**
 * Turns "what we wrote last time" plus new fragments into nftables
 * transactions, and commits the result into the {@link WrittenState} once the
 * kernel accepted it.
 *
 * Three planners share one per-fragment diff:
 * - {@link planPartial}: only the changed/deleted service ports are diffed;
 *   an unchanged sync yields an empty transaction.
 * - {@link planFull}: every fragment rebuilt from scratch and diffed against
 *   the written state after it was corrected from a cheap kernel view
 *   ({@link KernelView}: chain names and dispatch-map elements), so cache bugs
 *   and outside tampering are repaired. With an empty written state and an
 *   existing table this is restart adoption: every chain is rewritten in
 *   place (add + flush + rules), elements are reconciled, unwanted chains are
 *   flushed and deleted later — never a flush of the table.
 * - {@link planStaleDeletion}: deletes chains flushed at least `delayMs` ago.
 *
 * Op order inside a transaction: table, then per fragment (skeleton first) its
 * new sets, chain adds/flushes and rules; then flushes of chains that went
 * away, element deletes, element adds, set deletes. So every referenced chain
 * or set exists before a rule or element uses it, and a chain's references
 * are dropped before it is deleted (in a later transaction).
 *
 * Why chain deletion is delayed: on kernels before 6.2, releasing a verdict
 * map element that points at a chain does not drop the chain's use count at
 * commit time; the element is freed asynchronously after the transaction, so
 * a `delete chain` in the same (or an immediately following) transaction fails
 * with EBUSY. Upstream kube-proxy hit exactly this (kubernetes#122604) and so
 * flushes stale chains at once and deletes them in a later sync. We do the
 * same with a ~1 s delay.
 *
 * @module
 */
import {
  type Chain,
  type Element,
  type Map as NftMap,
  type Operation,
  type Set as NftSet,
  Transaction,
} from "../ffi/nftables/types.ts";
import { elementId, type ElementSpec, type Fragment } from "./fragment.ts";
import {
  BASE_ID,
  type ChainRecord,
  type ElementRecord,
  indexFragments,
  type SetRecord,
  type WrittenState,
} from "./written_state.ts";

/** Comment of the tables we create. */
export const TABLE_COMMENT = "rules for kube-proxy";

/** What a cheap look at the kernel found (full syncs only). */
export interface KernelView {
  /** False when the table does not exist. */
  tableExists: boolean;
  /** Every chain name in the table. */
  chains: string[];
  /** Elements of the listed sets/maps (skeleton-owned ones), by set/map name. */
  elements: Map<string, Element[]>;
}

/** Knobs of the planner. */
export interface PlanOptions {
  /**
   * Cold start only: split chain creation into transactions of about this
   * many chains, followed by ONE transaction adding every element, so a
   * service is never reachable half-programmed. 0 = one transaction.
   */
  chunkChains?: number;
}

/** A planned sync: transactions to run in order, and what to commit after. */
export interface SyncPlan {
  /** Transactions in order (empty ones are dropped). Elements are always in the last one. */
  txs: Transaction[];
  /** Total number of operations. */
  ops: number;
  full: boolean;
  /** New fragment per id, null = removed. */
  fragments: Map<string, Fragment | null>;
  /** Chain index changes (null = gone). */
  chains: Map<string, ChainRecord | null>;
  sets: Map<string, SetRecord | null>;
  /** Element index changes; with `replaceElements` the complete new index. */
  elements: Map<string, ElementRecord | null>;
  replaceElements: boolean;
  /** Chains flushed by this plan, to be deleted later. */
  newlyStale: string[];
  contextKey: string | undefined;
}

function sameRules(a: readonly string[] | null, b: readonly string[]): boolean {
  if (a === null || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameValue(a: ElementSpec, b: ElementSpec): boolean {
  const av = a.value, bv = b.value;
  if (av === undefined || bv === undefined) return av === bv;
  if (av.length !== bv.length) return false;
  for (let i = 0; i < av.length; i++) if (av[i] !== bv[i]) return false;
  return true;
}

function sameSet(a: NftSet | NftMap, b: NftSet | NftMap): boolean {
  return a.kind === b.kind && a.type === b.type &&
    (a.kind === "map" ? a.dataType : "") === (b.kind === "map" ? b.dataType : "") &&
    (a.flags ?? []).join(",") === (b.flags ?? []).join(",") && a.timeout === b.timeout;
}

function toElement(e: ElementSpec): Element {
  const el: Element = { kind: "element", key: e.key };
  if (e.value !== undefined) el.value = e.value;
  if (e.comment !== undefined) el.comment = e.comment;
  return el;
}

function elementOp(verb: "add" | "delete", e: ElementSpec, isMap: boolean): Operation {
  const el = toElement(e);
  if (isMap) el.map = e.target;
  else el.set = e.target;
  if (verb === "delete") delete el.comment;
  return { verb, obj: el };
}

/** Accumulates ops in the order described in the module doc. */
class OpBuilder {
  head: Operation[] = [];
  /** One unit per fragment: set adds, chain adds/flushes, set re-creations, rules. */
  units: { ops: Operation[]; chains: number }[] = [];
  staleFlush: Operation[] = [];
  elemDel: Operation[] = [];
  elemAdd: Operation[] = [];
  setDel: Operation[] = [];
  forcedSets = 0;
  /** Chains some new fragment of this plan defines (changed or not). */
  defined = new Set<string>();

  /** Lays the ops out in transactions. */
  build(chunkChains: number): Transaction[] {
    const tail = [...this.staleFlush, ...this.elemDel, ...this.elemAdd, ...this.setDel];
    const txs: Transaction[] = [];
    let cur = new Transaction();
    for (const op of this.head) cur.ops.push(op);
    let chains = 0;
    for (const u of this.units) {
      if (chunkChains > 0 && chains > 0 && chains + u.chains > chunkChains) {
        txs.push(cur);
        cur = new Transaction();
        chains = 0;
      }
      for (const op of u.ops) cur.ops.push(op);
      chains += u.chains;
    }
    if (chunkChains > 0 && chains > 0 && tail.length > 0) {
      txs.push(cur);
      cur = new Transaction();
    }
    for (const op of tail) cur.ops.push(op);
    txs.push(cur);
    return txs.filter((t) => t.size > 0);
  }
}

/** Lookup through a plan's pending changes, then the written state. */
function lookup<T>(
  pending: Map<string, T | null>,
  written: Map<string, T>,
  k: string,
): T | undefined {
  const p = pending.get(k);
  if (p !== undefined) return p === null ? undefined : p;
  return pending.has(k) ? undefined : written.get(k);
}

/**
 * Diffs the chains and sets of one fragment against what is written,
 * appending a unit of ops. Removed chains/sets are returned to the caller,
 * which decides (after all fragments) whether they are really gone.
 */
function diffFragmentStructure(
  written: WrittenState,
  plan: SyncPlan,
  ob: OpBuilder,
  oldF: Fragment | undefined,
  newF: Fragment | null,
  removedChains: Set<string>,
  removedSets: Map<string, number>,
): void {
  const ops: Operation[] = [];
  let chainCount = 0;
  const newChains = new Set<string>();
  const newSets = new Set<string>();
  const forced: string[] = [];
  if (newF !== null) {
    for (const s of newF.sets) {
      newSets.add(s.name);
      const old = lookup(plan.sets, written.sets, s.name);
      const ownedBefore = oldF?.sets.some((o) => o.name === s.name) ?? false;
      if (old === undefined) {
        ops.push({ verb: "add", obj: s });
        plan.sets.set(s.name, { spec: s, refs: 1 });
      } else {
        if (!sameSet(old.spec, s)) forced.push(s.name);
        plan.sets.set(s.name, { spec: s, refs: old.refs + (ownedBefore ? 0 : 1) });
      }
    }
    const rules: Operation[] = [];
    for (const c of newF.chains) {
      const name = c.chain.name;
      newChains.add(name);
      ob.defined.add(name);
      const old = lookup(plan.chains, written.chains, name);
      const mustRewrite = forced.length > 0 &&
        c.rules.some((r) => forced.some((s) => r.includes(`@${s}`)));
      if (old !== undefined && !mustRewrite && sameRules(old.rules, c.rules)) {
        if (old.chain !== c.chain) plan.chains.set(name, { chain: c.chain, rules: c.rules });
        continue;
      }
      if (old !== undefined && old.rules === null && c.chain.hook !== undefined) {
        // A base chain of unknown origin (restart adoption) may have another
        // hook/priority, which `add` cannot change: re-create it, atomically
        // within this transaction (nothing can jump to a base chain).
        ops.push({ verb: "add", obj: { kind: "chain", name } });
        ops.push({ verb: "flush", obj: { kind: "chain", name } });
        ops.push({ verb: "delete", obj: { kind: "chain", name } });
        ops.push({ verb: "add", obj: c.chain });
      } else {
        ops.push({ verb: "add", obj: c.chain });
        if (old !== undefined) ops.push({ verb: "flush", obj: { kind: "chain", name } });
      }
      chainCount++;
      for (const r of c.rules) {
        rules.push({ verb: "add", obj: { kind: "rule", chain: name, rule: r } });
      }
      plan.chains.set(name, { chain: c.chain, rules: c.rules });
    }
    for (const s of forced) {
      const spec = newF.sets.find((x) => x.name === s)!;
      ops.push({ verb: "delete", obj: spec });
      ops.push({ verb: "add", obj: spec });
      ob.forcedSets++;
    }
    for (const r of rules) ops.push(r);
  }
  if (oldF !== undefined) {
    for (const c of oldF.chains) if (!newChains.has(c.chain.name)) removedChains.add(c.chain.name);
    for (const s of oldF.sets) {
      if (!newSets.has(s.name)) removedSets.set(s.name, (removedSets.get(s.name) ?? 0) + 1);
    }
  }
  if (ops.length > 0) ob.units.push({ ops, chains: chainCount });
}

/** Emits flushes for chains that went away and deletes for unowned sets. */
function finishStructure(
  written: WrittenState,
  plan: SyncPlan,
  ob: OpBuilder,
  removedChains: Set<string>,
  removedSets: Map<string, number>,
): void {
  for (const name of removedChains) {
    if (ob.defined.has(name) || !written.chains.has(name)) continue;
    ob.staleFlush.push({ verb: "flush", obj: { kind: "chain", name } });
    plan.chains.set(name, null);
    plan.newlyStale.push(name);
  }
  for (const [name, dropped] of removedSets) {
    const rec = lookup(plan.sets, written.sets, name);
    if (rec === undefined) continue;
    const refs = rec.refs - dropped;
    if (refs > 0) {
      plan.sets.set(name, { spec: rec.spec, refs });
    } else {
      ob.setDel.push({ verb: "delete", obj: rec.spec });
      plan.sets.set(name, null);
    }
  }
}

function newPlan(full: boolean, contextKey: string | undefined): SyncPlan {
  return {
    txs: [],
    ops: 0,
    full,
    fragments: new Map(),
    chains: new Map(),
    sets: new Map(),
    elements: new Map(),
    replaceElements: false,
    newlyStale: [],
    contextKey,
  };
}

function isMapTarget(written: WrittenState, plan: SyncPlan, target: string): boolean {
  const rec = lookup(plan.sets, written.sets, target);
  return rec?.spec.kind === "map";
}

function seal(plan: SyncPlan, ob: OpBuilder, chunkChains: number): SyncPlan {
  plan.txs = ob.build(ob.forcedSets > 0 ? 0 : chunkChains);
  plan.ops = plan.txs.reduce((n, t) => n + t.size, 0);
  return plan;
}

/**
 * Plans a partial sync: `changes` maps each changed service port id to its
 * rebuilt fragment, or null when the service port is gone. Fragments whose
 * content is unchanged cost nothing. `structureOnly` plans just sets, chains
 * and rules (a streamed cold-start chunk; a full plan adds the elements
 * after), `withTable` prepends `add table`.
 */
export function planPartial(
  written: WrittenState,
  changes: Map<string, Fragment | null>,
  opts: { structureOnly?: boolean; withTable?: boolean } = {},
): SyncPlan {
  const plan = newPlan(false, written.contextKey);
  const ob = new OpBuilder();
  const removedChains = new Set<string>();
  const removedSets = new Map<string, number>();
  // Net ownership change per element id, and the value (and owner) the new owners want.
  const delta = new Map<string, { d: number; spec?: ElementSpec; owner?: string }>();
  if (opts.withTable) ob.head.push({ verb: "add", obj: { kind: "table", comment: TABLE_COMMENT } });
  for (const [id, newF] of changes) {
    const oldF = written.fragments.get(id);
    if (oldF === undefined && newF === null) continue;
    diffFragmentStructure(written, plan, ob, oldF, newF, removedChains, removedSets);
    if (opts.structureOnly) {
      plan.fragments.set(id, newF);
      continue;
    }
    if (oldF !== undefined) {
      for (const e of oldF.elements) {
        const k = elementId(e);
        const cur = delta.get(k);
        if (cur === undefined) delta.set(k, { d: -1 });
        else cur.d--;
      }
    }
    if (newF !== null) {
      for (const e of newF.elements) {
        const k = elementId(e);
        const cur = delta.get(k);
        if (cur === undefined) delta.set(k, { d: 1, spec: e, owner: id });
        else {
          cur.d++;
          cur.spec = e;
          cur.owner = id;
        }
      }
    }
    plan.fragments.set(id, newF);
  }
  finishStructure(written, plan, ob, removedChains, removedSets);
  const touched = new Set(changes.keys());
  for (const [k, { d, spec, owner }] of delta) {
    const old = written.elements.get(k);
    const refs = (old?.refs ?? 0) + d;
    if (refs <= 0) {
      if (old !== undefined) {
        ob.elemDel.push(elementOp("delete", old.spec, isMapTarget(written, plan, old.spec.target)));
        plan.elements.set(k, null);
      }
      continue;
    }
    let want = spec ?? old!.spec;
    let wantOwner = owner ?? old?.owner;
    if (spec === undefined && old?.owner !== undefined && touched.has(old.owner)) {
      // The owner whose value is written left: write a remaining owner's value.
      const other = written.findOwner(k, touched, changes);
      if (other !== undefined) {
        want = other.spec;
        wantOwner = other.owner;
      }
    }
    if (old === undefined) {
      ob.elemAdd.push(elementOp("add", want, isMapTarget(written, plan, want.target)));
    } else if (!sameValue(old.spec, want)) {
      const isMap = isMapTarget(written, plan, want.target);
      ob.elemDel.push(elementOp("delete", old.spec, isMap));
      ob.elemAdd.push(elementOp("add", want, isMap));
    }
    plan.elements.set(k, { spec: want, refs, owner: wantOwner });
  }
  return seal(plan, ob, 0);
}

/**
 * Corrects the written state from what the kernel has, before a full diff:
 * chains we think exist but do not are forgotten (so they are re-created);
 * chains we do not know but want get content "unknown" (so they are
 * rewritten); unknown unwanted chains are returned for flushing; listed
 * elements that are missing are forgotten, wrong values are taken from the
 * kernel (so they are replaced) and unknown ones are recorded with zero owners
 * (so they are deleted).
 */
export function correctFromKernel(
  written: WrittenState,
  view: KernelView,
  wantedChains: ReadonlySet<string>,
): string[] {
  const inKernel = new Set(view.chains);
  for (const name of [...written.chains.keys()]) {
    if (!inKernel.has(name)) written.chains.delete(name);
  }
  for (const name of [...written.staleChains.keys()]) {
    if (!inKernel.has(name)) written.staleChains.delete(name);
  }
  const extra: string[] = [];
  for (const name of view.chains) {
    if (written.chains.has(name) || written.staleChains.has(name)) continue;
    if (wantedChains.has(name)) {
      written.chains.set(name, { chain: { kind: "chain", name }, rules: null });
    } else {
      extra.push(name);
    }
  }
  for (const [target, elems] of view.elements) {
    const ours = written.elementsOf(target);
    const seen = new Set<string>();
    for (const e of elems) {
      const spec: ElementSpec = { target, key: e.key, value: e.value, comment: e.comment };
      const id = elementId(spec);
      seen.add(id);
      const rec = ours.get(id);
      if (rec === undefined) written.elements.set(id, { spec, refs: 0 });
      else if (!sameValue(rec.spec, spec)) rec.spec = spec;
    }
    for (const id of ours.keys()) if (!seen.has(id)) written.elements.delete(id);
  }
  return extra;
}

/**
 * Plans a full sync from freshly built fragments (`fragments` must include
 * {@link BASE_ID}). Pass `view` (from the kernel) to verify and repair; a
 * view without the table, or an empty written state, plans a cold start.
 */
export function planFull(
  written: WrittenState,
  fragments: Map<string, Fragment>,
  contextKey: string | undefined,
  view?: KernelView,
  opts: PlanOptions = {},
): SyncPlan {
  if (!fragments.has(BASE_ID)) {
    throw new Error("planFull: fragments must include the base (BASE_ID)");
  }
  const plan = newPlan(true, contextKey);
  const ob = new OpBuilder();
  let extraChains: string[] = [];
  if (view !== undefined && !view.tableExists) written.clear();
  const cold = written.empty && (view === undefined || !view.tableExists);
  const next = indexFragments(fragments);
  if (view !== undefined && view.tableExists) {
    extraChains = correctFromKernel(written, view, new Set(next.chains.keys()));
  }
  ob.head.push({ verb: "add", obj: { kind: "table", comment: TABLE_COMMENT } });
  const removedChains = new Set<string>();
  const removedSets = new Map<string, number>();
  // Skeleton first: service chains may reference its chains and maps.
  const order = [BASE_ID, ...[...fragments.keys()].filter((k) => k !== BASE_ID)];
  for (const id of order) {
    const f = fragments.get(id)!;
    diffFragmentStructure(
      written,
      plan,
      ob,
      written.fragments.get(id),
      f,
      removedChains,
      removedSets,
    );
    plan.fragments.set(id, f);
  }
  for (const [id, f] of written.fragments) {
    if (fragments.has(id)) continue;
    diffFragmentStructure(written, plan, ob, f, null, removedChains, removedSets);
    plan.fragments.set(id, null);
  }
  // Chains we believe exist but no fragment owns (cache drift) go stale too.
  for (const name of written.chains.keys()) if (!next.chains.has(name)) removedChains.add(name);
  // Set ownership is recounted from scratch below.
  finishStructure(written, plan, ob, removedChains, new Map());
  for (const name of extraChains) {
    ob.staleFlush.push({ verb: "flush", obj: { kind: "chain", name } });
    plan.newlyStale.push(name);
  }
  // Sets are rebuilt from scratch too (refcount drift).
  for (const [name, rec] of next.sets) plan.sets.set(name, rec);
  for (const [name, rec] of written.sets) {
    if (next.sets.has(name) || plan.sets.get(name) === null) continue;
    ob.setDel.push({ verb: "delete", obj: rec.spec });
    plan.sets.set(name, null);
  }
  const isMap = (t: string) => next.sets.get(t)?.spec.kind === "map";
  for (const [k, old] of written.elements) {
    if (!next.elements.has(k)) {
      ob.elemDel.push(elementOp("delete", old.spec, isMap(old.spec.target)));
    }
  }
  for (const [k, rec] of next.elements) {
    const old = written.elements.get(k);
    if (old === undefined) {
      ob.elemAdd.push(elementOp("add", rec.spec, isMap(rec.spec.target)));
    } else if (!sameValue(old.spec, rec.spec)) {
      ob.elemDel.push(elementOp("delete", old.spec, isMap(rec.spec.target)));
      ob.elemAdd.push(elementOp("add", rec.spec, isMap(rec.spec.target)));
    }
  }
  plan.elements = next.elements;
  plan.replaceElements = true;
  const sealed = seal(plan, ob, cold ? opts.chunkChains ?? 0 : 0);
  // A full sync that changed nothing must not even re-add the table.
  if (sealed.ops === 1) {
    sealed.txs = [];
    sealed.ops = 0;
  }
  return sealed;
}

/**
 * Plans deletion of stale chains flushed at least `delayMs` before `now`
 * (and not re-used since). Returns null when there is nothing to delete.
 */
export function planStaleDeletion(
  written: WrittenState,
  now: number,
  delayMs: number,
): { tx: Transaction; chains: string[] } | null {
  const chains: string[] = [];
  for (const [name, at] of written.staleChains) {
    if (written.chains.has(name)) continue;
    if (now - at >= delayMs) chains.push(name);
  }
  if (chains.length === 0) return null;
  const tx = new Transaction();
  for (const name of chains) tx.delete({ kind: "chain", name } as Chain);
  return { tx, chains };
}

/** Earliest time (engine clock) a stale chain becomes deletable, or undefined. */
export function nextStaleDeadline(written: WrittenState, delayMs: number): number | undefined {
  let min: number | undefined;
  for (const at of written.staleChains.values()) {
    if (min === undefined || at < min) min = at;
  }
  return min === undefined ? undefined : min + delayMs;
}

/** Records a successfully applied plan in the written state. */
export function commitPlan(written: WrittenState, plan: SyncPlan, now: number): void {
  for (const [id, f] of plan.fragments) {
    if (f === null) written.fragments.delete(id);
    else written.fragments.set(id, f);
  }
  for (const [name, rec] of plan.chains) {
    if (rec === null) written.chains.delete(name);
    else {
      written.chains.set(name, rec);
      written.staleChains.delete(name);
    }
  }
  for (const [name, rec] of plan.sets) {
    if (rec === null) written.sets.delete(name);
    else written.sets.set(name, rec);
  }
  if (plan.replaceElements) {
    written.elements.clear();
    for (const [k, rec] of plan.elements) if (rec !== null) written.elements.set(k, rec);
  } else {
    for (const [k, rec] of plan.elements) {
      if (rec === null) written.elements.delete(k);
      else written.elements.set(k, rec);
    }
  }
  for (const name of plan.newlyStale) written.staleChains.set(name, now);
  written.contextKey = plan.contextKey;
}

/** Records that stale chains were deleted. */
export function commitStaleDeletion(written: WrittenState, chains: readonly string[]): void {
  for (const name of chains) written.staleChains.delete(name);
}
