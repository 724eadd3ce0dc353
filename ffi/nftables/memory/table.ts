/**
 * The tables of the in-memory nftables: the entries it keeps, the
 * copy-on-write {@link TableDraft} one transaction works on, the reference counts
 * the kernel keeps (jumps to chains, rules using sets), and the jump-depth
 * check.
 *
 * @module
 */
import type {
  Chain,
  Element,
  Map as NftMap,
  Operation,
  Rule,
  Set as NftSet,
  SetFlag,
} from "../types.ts";
import { type DataType, type Part } from "./datatypes.ts";
import { EEXIST, EMLINK, ENOENT, EOPNOTSUPP, fail, invalid, MAX_JUMP_DEPTH } from "./errors.ts";
import { checkLookupType } from "./expr.ts";
import { checkName, type RuleRefs } from "./rule.ts";

/** A rule as the table keeps it. */
export interface RuleEntry {
  /** The rule body as written. */
  body: string;
  /** The rule's comment. */
  comment?: string;
  /** The rule's handle. */
  handle: number;
  /** What the body refers to. */
  refs: RuleRefs;
}

/** A chain with its handle and rules. */
export interface ChainEntry {
  /** The chain as defined. */
  chain: Chain;
  /** The chain's handle. */
  handle: number;
  /** Its rules, in order. */
  rules: RuleEntry[];
}

/** A set or map element in canonical parts. */
export interface ElementEntry {
  /** The key's parts. */
  key: Part[];
  /** A map element's value parts. */
  value?: Part[];
  /** The element's comment. */
  comment?: string;
}

/** A set or map with its parsed types and elements. */
export interface SetEntry {
  /** The set or map as defined. */
  def: NftSet | NftMap;
  /** Its handle. */
  handle: number;
  /** The datatype of each key part. */
  keyTypes: DataType[];
  /** A map's value datatypes. */
  valueTypes?: DataType[];
  /** It has the interval flag. */
  interval: boolean;
  /** By canonical key text. */
  elements: globalThis.Map<string, ElementEntry>;
}

/** A named counter and what it counted. */
export interface CounterEntry {
  /** The counter's handle. */
  handle: number;
  /** Packets counted. */
  packets: number;
  /** Bytes counted. */
  bytes: number;
}

/** One table: its objects and the reference counts the kernel keeps. */
export interface TableData {
  /** The table's comment. */
  comment?: string;
  /** The handle the next object gets. */
  nextHandle: number;
  /** Chains by name. */
  chains: globalThis.Map<string, ChainEntry>;
  /** Sets and maps by name. */
  sets: globalThis.Map<string, SetEntry>;
  /** Named counters by name. */
  counters: globalThis.Map<string, CounterEntry>;
  /** Rules referring to each named counter. */
  counterRefs: globalThis.Map<string, number>;
  /** Jumps/gotos and map elements pointing at each chain (the kernel's use count, minus rules). */
  chainRefs: globalThis.Map<string, number>;
  /** Rules referring to each set or map. */
  setRefs: globalThis.Map<string, number>;
}

/** Adds `d` to the count of `k`, dropping it at zero. */
export function bump(m: globalThis.Map<string, number>, k: string, d: number): void {
  const v = (m.get(k) ?? 0) + d;
  if (v === 0) m.delete(k);
  else m.set(k, v);
}

/** The entry `name` of `m`, replaced by its `clone` the first time this draft owns it. */
function owned<T>(
  m: globalThis.Map<string, T>,
  own: globalThis.Set<string>,
  name: string,
  what: string,
  clone: (e: T) => T,
): T {
  const e = m.get(name);
  if (e === undefined) fail(ENOENT, `${what} does not exist`);
  if (own.has(name)) return e;
  const copy = clone(e);
  m.set(name, copy);
  own.add(name);
  return copy;
}

/**
 * A copy-on-write view of a table for one transaction: containers are copied
 * shallowly, and a chain or set is cloned the first time the transaction
 * changes it, so the committed table is never touched before the swap.
 */
export class TableDraft {
  /** The table as this transaction sees it. */
  readonly t: TableData;
  #ownedChains = new globalThis.Set<string>();
  #ownedSets = new globalThis.Set<string>();
  #createdSets = new globalThis.Set<string>();

  /** A view of `base` that copies what it changes. */
  constructor(base: TableData) {
    this.t = {
      comment: base.comment,
      nextHandle: base.nextHandle,
      chains: new globalThis.Map(base.chains),
      sets: new globalThis.Map(base.sets),
      counters: new globalThis.Map(base.counters),
      counterRefs: new globalThis.Map(base.counterRefs),
      chainRefs: new globalThis.Map(base.chainRefs),
      setRefs: new globalThis.Map(base.setRefs),
    };
  }

  /** The chain, cloned on first use in this transaction. Throws ENOENT. */
  chain(name: string): ChainEntry {
    return owned(this.t.chains, this.#ownedChains, name, `chain ${name}`, (c) => ({
      ...c,
      rules: c.rules.slice(),
    }));
  }

  /** Adds a chain this transaction made. */
  newChain(e: ChainEntry): void {
    this.t.chains.set(e.chain.name, e);
    this.#ownedChains.add(e.chain.name);
  }

  /** The set or map, cloned on first use in this transaction. Throws ENOENT. */
  set(name: string): SetEntry {
    return owned(this.t.sets, this.#ownedSets, name, `set or map ${name}`, (s) => ({
      ...s,
      elements: new globalThis.Map(s.elements),
    }));
  }

  /** Adds a set or map this transaction made. */
  newSet(e: SetEntry): void {
    this.t.sets.set(e.def.name, e);
    this.#ownedSets.add(e.def.name);
    this.#createdSets.add(e.def.name);
  }

  /** Whether this transaction created the set or map (nft then knows it from the batch). */
  createdHere(name: string): boolean {
    return this.#createdSets.has(name);
  }
}

/** A table with no objects; handles start at 1. */
export function emptyTable(comment?: string): TableData {
  return {
    comment,
    nextHandle: 1,
    chains: new globalThis.Map(),
    sets: new globalThis.Map(),
    counters: new globalThis.Map(),
    counterRefs: new globalThis.Map(),
    chainRefs: new globalThis.Map(),
    setRefs: new globalThis.Map(),
  };
}

/** Whether the chain is a base chain (it has a type and a hook). */
export function isBase(c: Chain): boolean {
  return c.type !== undefined && c.hook !== undefined;
}

/**
 * A set or map definition as the kernel lists it back (nft 1.0.6, measured):
 * a default timeout implies the `timeout` flag, flags print in the order
 * constant, interval, dynamic, timeout, and a lone `timeout` flag is not
 * listed when the set has a default timeout.
 */
export function listedDef<T extends NftSet | NftMap>(def: T): T {
  const out = { ...def };
  const f = new globalThis.Set<SetFlag>(def.flags ?? []);
  if (def.timeout !== undefined) f.add("timeout");
  const ordered = (["constant", "interval", "dynamic", "timeout"] as const).filter((x) => f.has(x));
  const hidden = ordered.length === 0 || (ordered.length === 1 && def.timeout !== undefined);
  if (hidden) delete out.flags;
  else out.flags = ordered;
  return out;
}

/** Compares flags as the kernel sees them: a default timeout implies `timeout`. */
export function sameFlags(a: NftSet | NftMap, b: NftSet | NftMap): boolean {
  const eff = (x: NftSet | NftMap) => {
    const f = new globalThis.Set<SetFlag>(x.flags ?? []);
    if (x.timeout !== undefined) f.add("timeout");
    return [...f].sort().join(",");
  };
  return eff(a) === eff(b);
}

/** A set type in one spelling, for comparing re-adds. */
export function normType(t: string): string {
  if (t.startsWith("typeof ")) return t.replace(/\s+/g, " ");
  return t.split(".").map((p) => p.trim()).join(" . ");
}

/** Parses a key or value (one part per type) in canonical form. */
export function parseParts(
  parts: string[],
  types: DataType[],
  interval: boolean,
  what: string,
  set: string,
): Part[] {
  // A part may hold several fields of a concatenation ("1.2.3.4 . tcp . 80").
  const flat = parts.flatMap((p) => p.split(" . ")).map((p) => p.trim());
  if (flat.length !== types.length) {
    invalid(
      `${set}: ${what} "${flat.join(" . ")}" has ${flat.length} part(s), type ${
        types.map((t) => t.name).join(" . ")
      } needs ${types.length}`,
    );
  }
  return flat.map((p, i) => {
    try {
      return types[i].parse(p, interval);
    } catch (e) {
      invalid(`${set}: ${what} "${flat.join(" . ")}": ${(e as Error).message}`);
    }
  });
}

/** nft rejects a new interval that overlaps an existing one (identical ones were handled). */
export function checkOverlap(s: SetEntry, key: Part[]): void {
  for (const [k, e] of s.elements) {
    if (e.key.every((p, i) => p.lo <= key[i].hi && key[i].lo <= p.hi)) {
      const where = `${s.def.kind} ${s.def.name}`;
      if (key.length === 1) invalid(`interval overlaps with an existing one (${k} in ${where})`);
      fail(EEXIST, `element overlaps ${k} in ${where}`);
    }
  }
}

/** Counts a jump, goto or verdict element to `name`, refusing a missing or base chain. */
export function holdChain(d: TableDraft, name: string): void {
  checkName("chain", name);
  const c = d.t.chains.get(name);
  if (c === undefined) fail(ENOENT, `chain ${name} does not exist (jump/goto target)`);
  if (isBase(c.chain)) fail(EOPNOTSUPP, `cannot jump/goto base chain ${name}`);
  bump(d.t.chainRefs, name, 1);
}

/** Counts what a new rule refers to, refusing missing sets and chains. */
export function holdRule(d: TableDraft, refs: RuleRefs): void {
  for (const s of refs.sets) {
    if (!d.t.sets.has(s)) fail(ENOENT, `set or map @${s} does not exist`);
  }
  for (const l of refs.lookups) {
    const s = d.t.sets.get(l.set)!;
    checkLookupType(l, s.keyTypes.map((t) => t.name));
    const conflict = protocolConflict(s.def);
    // nft 1.0.6 gets this wrong only for a map it read back from the kernel.
    if (conflict !== undefined && !d.createdHere(l.set)) {
      invalid(`conflicting protocols specified: ${conflict} (@${l.set})`);
    }
  }
  for (const c of refs.counters) {
    if (!d.t.counters.has(c)) fail(ENOENT, `counter ${c} does not exist`);
  }
  for (const c of refs.chains) holdChain(d, c);
  for (const s of refs.sets) bump(d.t.setRefs, s, 1);
  for (const c of refs.counters) bump(d.t.counterRefs, c, 1);
}

/**
 * nft 1.0.6 refuses every rule using a map it read back from the kernel
 * whose `typeof` value joins a network-header field and a `th` field
 * (`ip daddr . th dport`): "conflicting protocols specified: ip vs. th".
 * Returns the "ip vs. th" part, or undefined.
 */
export function protocolConflict(def: NftSet | NftMap): string | undefined {
  if (def.kind !== "map" || !def.type.startsWith("typeof ")) return undefined;
  const parts = def.dataType.split(" . ").map((p) => p.trim().split(/\s+/)[0]);
  const net = parts.find((p) => p === "ip" || p === "ip6");
  return net !== undefined && parts.includes("th") ? `${net} vs. th` : undefined;
}

/** Drops the counts a removed rule held. */
export function releaseRule(d: TableDraft, r: RuleEntry): void {
  for (const c of r.refs.chains) bump(d.t.chainRefs, c, -1);
  for (const s of r.refs.sets) bump(d.t.setRefs, s, -1);
  for (const c of r.refs.counters) bump(d.t.counterRefs, c, -1);
}

/** Drops the chain count a removed verdict element held. */
export function releaseElement(d: TableDraft, e: ElementEntry): void {
  for (const p of e.value ?? []) {
    if (p.chain !== undefined) bump(d.t.chainRefs, p.chain, -1);
  }
}

/** Ops that can add a jump/goto edge to the chain graph. */
export function addsEdges(op: Operation): boolean {
  const { verb, obj } = op;
  if (obj.kind === "rule") return verb !== "delete";
  return obj.kind === "element" && verb !== "delete";
}

/**
 * Checks what the kernel checks for chains reachable from a base chain: no
 * loops and at most {@link MAX_JUMP_DEPTH} - 1 jumps/gotos deep, following
 * rules' jumps and gotos and the verdicts of maps they look up. Returns the
 * error text, or undefined when the graph is fine.
 */
export function jumpDepthError(t: TableData): string | undefined {
  // Longest jump path below each chain whose subtree has been fully walked.
  const below = new globalThis.Map<string, number>();
  const onStack = new globalThis.Set<string>();
  class TooDeep extends Error {}
  // Recursion stops at MAX_JUMP_DEPTH, so the stack stays shallow.
  const walk = (name: string, level: number): number => {
    if (level >= MAX_JUMP_DEPTH || onStack.has(name)) throw new TooDeep(name);
    const known = below.get(name);
    if (known !== undefined) {
      if (level + known >= MAX_JUMP_DEPTH) throw new TooDeep(name);
      return known;
    }
    const c = t.chains.get(name);
    if (c === undefined) return 0;
    onStack.add(name);
    let d = 0;
    for (const r of c.rules) {
      for (const next of r.refs.chains) d = Math.max(d, 1 + walk(next, level + 1));
      for (const setName of r.refs.sets) {
        const s = t.sets.get(setName);
        if (s === undefined || s.valueTypes?.[0]?.name !== "verdict") continue;
        for (const e of s.elements.values()) {
          const next = e.value?.[0]?.chain;
          if (next !== undefined) d = Math.max(d, 1 + walk(next, level + 1));
        }
      }
    }
    onStack.delete(name);
    below.set(name, d);
    return d;
  };
  for (const [name, c] of t.chains) {
    if (!isBase(c.chain)) continue;
    try {
      walk(name, 0);
    } catch (e) {
      if (!(e instanceof TooDeep)) throw e;
      return `${EMLINK}: base chain ${name} reaches chain ${e.message} through a loop or ` +
        `more than ${MAX_JUMP_DEPTH - 1} jumps`;
    }
  }
  return undefined;
}

/** A rule as the listing returns it. */
export function toRule(chain: string, r: RuleEntry): Rule {
  const out: Rule = { kind: "rule", chain, rule: r.body, handle: r.handle };
  if (r.comment !== undefined) out.comment = r.comment;
  return out;
}

/** An element as the listing returns it. */
export function toElement(s: SetEntry, e: ElementEntry): Element {
  const out: Element = { kind: "element", key: e.key.map((p) => p.text) };
  if (s.def.kind === "set") out.set = s.def.name;
  else out.map = s.def.name;
  if (e.value !== undefined) out.value = e.value.map((p) => p.text);
  if (e.comment !== undefined) out.comment = e.comment;
  return out;
}

/** Orders element keys by their canonical text (stable, locale-independent). */
export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
