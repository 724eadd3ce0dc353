/**
 * The in-memory nftables: an {@link NftablesClient} for one table, in the
 * spirit of knftables' Fake. It applies transactions atomically and rejects what the
 * kernel (with nft 1.0.6 in front of it) rejects, as measured on kernel 6.18:
 *
 * - any op on a missing table except add/create table (ENOENT);
 * - unknown chains, sets, maps, rule handles, elements (ENOENT);
 * - `create` of an existing table, chain, set, map or element (EEXIST);
 * - `add` of an existing chain that differs: regular vs base or another base
 *   chain type (EEXIST), another hook or priority (EOPNOTSUPP); the policy may
 *   change;
 * - `add` of an existing set or map with another type, data type or flags, or
 *   whose name is taken by the other kind (EEXIST);
 * - `add` of an existing map element with another value (EEXIST); the same
 *   value is a no-op (the old comment stays);
 * - jumps/gotos (rules, inline vmaps, verdict-map elements) to missing chains
 *   (ENOENT) or to base chains (EOPNOTSUPP); `@name` of a missing set (ENOENT);
 * - deleting a chain still referenced by a jump/goto or a map element, or a
 *   set/map still referenced by a rule (EBUSY). A chain's rules do not block
 *   its deletion (the kernel deletes them with it) unless one jumps to the
 *   chain itself;
 * - elements that do not fit the set type, prefixes/ranges in a set without
 *   `flags interval`, overlapping intervals;
 * - nft keywords (`dnat`, `counter`, ...) as chain, set or map names;
 * - loops, or jump paths deeper than 15, below a base chain, through rules
 *   and verdict maps (EMLINK; unreachable chains are not checked);
 * - rule bodies with a word nft does not know (`frobnicate drop`), or whose
 *   `@set`, `vmap @m` or `map @m` key expression has another type than the
 *   set (`ip daddr @v6set`: "datatype mismatch"); expressions it does not
 *   know are not type-checked (memory/expr.ts);
 * - rules using a map read back from the kernel (made by an earlier
 *   transaction) whose `typeof` value joins `ip daddr` and `th dport`: nft
 *   1.0.6's "conflicting protocols specified: ip vs. th";
 * - comments over 128 bytes of UTF-8 on tables, chains, sets, maps, rules and
 *   elements, element deletes included ("comment too long"). A delete's
 *   comment and value are otherwise ignored, even wrong ones, as nft does.
 *
 * `flush table` deletes every rule but keeps chains, sets and elements, like
 * the kernel. Re-adding a set takes its new default timeout. Reads (`state()`,
 * `list()`, `dump()`) return elements in canonical form (`6` -> `tcp`,
 * compressed IPv6, masked prefixes, marks as 0x%08x) and set flags as nft
 * lists them; a `comment "..."` at the end of a rule body becomes the rule's
 * comment. Rule bodies are otherwise kept as written: the kernel normalises
 * some (`mark or 0x4000` lists as `mark | 0x00004000`). Handles come from one per-table counter shared by chains, sets,
 * rules and the anonymous sets inside rules, so on a table built only by
 * successful transactions they match the kernel's. (A transaction the kernel
 * rejects still burns handles; the fake's failures leave the counter alone.)
 *
 * @module
 */
import { renderOperation } from "../script.ts";
import {
  type Chain,
  type Element,
  type Family,
  type Map as NftMap,
  type NftablesClient,
  NftablesError,
  type Operation,
  type Rule,
  type Set as NftSet,
  type TableState,
  type Transaction,
} from "../types.ts";
import { EMLINK, ENOENT, OpError } from "./errors.ts";
import { dumpTable, tableState } from "./listing.ts";
import { step } from "./ops.ts";
import {
  addsEdges,
  jumpDepthError,
  listedDef,
  parseParts,
  type TableData,
  TableDraft,
  toElement,
} from "./table.ts";

/**
 * One nftables table held in memory, with the kernel's validation (see the
 * module doc). The dry-run `trace` and `explain` commands program it instead
 * of the kernel, and the unit tests use it as their kernel.
 */
export class MemoryNftables implements NftablesClient {
  #data: TableData | null = null;
  /** The last transaction passed to run() (successful or not). */
  lastTransaction: Transaction | null = null;
  /** Op counts of every successful run(), in order (empty transactions count as 0). */
  readonly opCounts: number[] = [];
  /** Number of run() calls that failed. */
  failedRuns = 0;
  #closed = false;

  /**
   * An empty in-memory table.
   * @param family the table's family.
   * @param table the table's name.
   */
  constructor(readonly family: Family, readonly table: string) {}

  /** Op count of the last successful run(), or 0 before any. */
  get lastOpCount(): number {
    return this.opCounts.length === 0 ? 0 : this.opCounts[this.opCounts.length - 1];
  }

  /** Applies all ops atomically: on any error nothing changes. Throws {@link NftablesError}. */
  run(tx: Transaction): Promise<void> {
    this.lastTransaction = tx;
    try {
      this.#data = this.#apply(tx);
    } catch (e) {
      this.failedRuns++;
      return Promise.reject(e);
    }
    this.opCounts.push(tx.size);
    return Promise.resolve();
  }

  /** Validates the transaction against the current state without applying it. */
  check(tx: Transaction): Promise<void> {
    try {
      this.#apply(tx);
    } catch (e) {
      return Promise.reject(e);
    }
    return Promise.resolve();
  }

  /** The table's contents, or null when the table does not exist. */
  list(): Promise<TableState | null> {
    return Promise.resolve(this.state());
  }

  /** A named counter's packets; undefined when it (or the table) does not exist. */
  counterPackets(name: string): Promise<number | undefined> {
    this.#ensureOpen();
    return Promise.resolve(this.#data?.counters.get(name)?.packets);
  }

  /** Counts `packets` on a named counter (tests stand in for traffic the kernel would count). */
  countPackets(name: string, packets: number): void {
    const c = this.#data?.counters.get(name);
    if (!c) throw new Error(`counter ${name} does not exist`);
    this.#data!.counters.set(name, { ...c, packets: c.packets + packets });
  }

  /** Chain names (sorted), or [] when the table does not exist. */
  listChains(): Promise<string[]> {
    this.#ensureOpen();
    return Promise.resolve(this.#data === null ? [] : [...this.#data.chains.keys()].sort());
  }

  /** Elements of one set or map. Rejects with ENOENT when it (or the table) does not exist. */
  listElements(kind: "set" | "map", name: string): Promise<Element[]> {
    this.#ensureOpen();
    const s = this.#data?.sets.get(name);
    if (s === undefined || s.def.kind !== kind) {
      return Promise.reject(
        new NftablesError(`${ENOENT}: ${kind} ${name} does not exist in ${this.#where()}`),
      );
    }
    return Promise.resolve([...s.elements.values()].map((e) => toElement(s, e)));
  }

  /** Rules per chain (chains without rules absent), empty when the table does not exist. */
  ruleCounts(): Promise<ReadonlyMap<string, number>> {
    this.#ensureOpen();
    const out = new Map<string, number>();
    for (const [name, c] of this.#data?.chains ?? []) {
      if (c.rules.length > 0) out.set(name, c.rules.length);
    }
    return Promise.resolve(out);
  }

  /** One chain with its rules, or null when it (or the table) does not exist. */
  listChain(name: string): Promise<{ chain: Chain; rules: Rule[] } | null> {
    return Promise.resolve(this.state()?.chains.get(name) ?? null);
  }

  /** The element with this key, or null. */
  getElement(kind: "set" | "map", name: string, key: string[]): Promise<Element | null> {
    this.#ensureOpen();
    const s = this.#data?.sets.get(name);
    if (s === undefined || s.def.kind !== kind) return Promise.resolve(null);
    let k: string;
    try {
      k = parseParts(key, s.keyTypes, s.interval, "key", name).map((p) => p.text).join(" . ");
    } catch {
      return Promise.resolve(null);
    }
    const e = s.elements.get(k);
    return Promise.resolve(e === undefined ? null : toElement(s, e));
  }

  /** Set and map declarations as the kernel lists them, or [] when the table does not exist. */
  listSets(): Promise<(NftSet | NftMap)[]> {
    this.#ensureOpen();
    return Promise.resolve([...this.#data?.sets.values() ?? []].map((s) => listedDef(s.def)));
  }

  /** Marks the client closed; later calls throw. */
  close(): void {
    this.#closed = true;
  }

  /**
   * The table as a {@link TableState} (fresh objects, safe to keep), or null
   * when it does not exist. Rules carry their handles; a comment written
   * inside a rule body is moved to `comment`, as the kernel does.
   */
  state(): TableState | null {
    this.#ensureOpen();
    return tableState(this.family, this.table, this.#data);
  }

  /**
   * A stable text dump in `nft list table` layout for golden tests: sets,
   * maps and chains sorted by name, elements sorted by key, rules in order,
   * no handles. Empty string when the table does not exist.
   */
  dump(): string {
    this.#ensureOpen();
    return dumpTable(this.family, this.table, this.#data);
  }

  #where(): string {
    return `table ${this.family} ${this.table}`;
  }

  #ensureOpen(): void {
    if (this.#closed) throw new Error("MemoryNftables: used after close()");
  }

  /** Validates and applies `tx` to a draft; returns the new table (or null). */
  #apply(tx: Transaction): TableData | null {
    this.#ensureOpen();
    let draft: TableDraft | null = this.#data === null ? null : new TableDraft(this.#data);
    let graphChanged = false;
    for (const [i, op] of tx.ops.entries()) {
      try {
        draft = step(draft, op, this.#where());
      } catch (e) {
        throw this.#wrap(e, op, i);
      }
      graphChanged ||= addsEdges(op);
    }
    if (draft !== null && graphChanged && jumpDepthError(draft.t) !== undefined) {
      throw this.#findDepthError(tx);
    }
    return draft === null ? null : draft.t;
  }

  /**
   * The kernel checks jump depth as each rule or element arrives; the fake
   * checks once per transaction and, only on failure, replays the ops to find
   * the first one that broke the limit.
   */
  #findDepthError(tx: Transaction): NftablesError {
    let draft: TableDraft | null = this.#data === null ? null : new TableDraft(this.#data);
    for (const [i, op] of tx.ops.entries()) {
      draft = step(draft, op, this.#where());
      if (draft === null || !addsEdges(op)) continue;
      const err = jumpDepthError(draft.t);
      if (err !== undefined) return this.#wrap(new OpError(err), op, i);
    }
    return new NftablesError(`${EMLINK}: jump depth exceeded`);
  }

  #wrap(e: unknown, op: Operation, i: number): NftablesError {
    let cmd: string | undefined;
    try {
      cmd = renderOperation(this.family, this.table, op);
    } catch {
      cmd = `${op.verb} ${op.obj.kind}`;
    }
    const msg = e instanceof Error ? e.message : String(e);
    return new NftablesError(msg, i, cmd);
  }
}
