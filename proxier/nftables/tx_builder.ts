/**
 * Lays a plan's operations out in transactions. Within a transaction the
 * order is: table, declarations (sets, chain adds and flushes), rules,
 * element deletes, element adds. So every chain or set exists before an element or rule uses it, a
 * changed element is deleted before it is re-added, and references are
 * dropped before anything is deleted (deletion itself comes in a later
 * transaction, see stale.ts).
 *
 * A cold start or a regeneration may be cut into several transactions
 * ({@link TxBuilder.take}): each carries whole service units, and a
 * service's elements travel with it, so no service is ever reachable
 * half-programmed.
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
} from "../../ffi/nftables/types.ts";
import { TABLE_COMMENT } from "./names.ts";

/** Receives element operations in the order they must run (frontend.ts `diffFrontend`). */
export interface ElementSink {
  /** An element delete. */
  del(e: Element): void;
  /** An element add. */
  add(e: Element): void;
}

/** The operations of one service port (or of the shared part of a plan). */
export class Unit implements ElementSink {
  /** Set and chain adds, flushes and re-creations. */
  readonly decls: Operation[] = [];
  /** Rule adds (after the chains they go in). */
  readonly rules: Operation[] = [];
  /** Element deletes. */
  readonly dels: Operation[] = [];
  /** Element adds (after the deletes). */
  readonly adds: Operation[] = [];

  /** Element delete (the key is enough; the comment would be refused). */
  del(e: Element): void {
    const { comment: _c, value: _v, ...key } = e;
    this.dels.push({ verb: "delete", obj: key });
  }
  /** Element add. */
  add(e: Element): void {
    this.adds.push({ verb: "add", obj: e });
  }
  /** Adds a chain (or makes sure it exists), optionally emptying it, then its rules. */
  chain(c: Chain, rules: readonly string[], flush: boolean): void {
    this.decls.push({ verb: "add", obj: c });
    if (flush) this.flushChain(c.name);
    for (const rule of rules) {
      this.rules.push({ verb: "add", obj: { kind: "rule", chain: c.name, rule } });
    }
  }
  /** Re-creates a base chain whose hook or priority may differ (same transaction: no gap). */
  recreateBaseChain(c: Chain, rules: readonly string[]): void {
    const name = { kind: "chain" as const, name: c.name };
    this.decls.push({ verb: "add", obj: name });
    this.decls.push({ verb: "flush", obj: name });
    this.decls.push({ verb: "delete", obj: name });
    this.chain(c, rules, false);
  }
  /** Empties a chain (dropping what its rules referenced). */
  flushChain(name: string): void {
    this.decls.push({ verb: "flush", obj: { kind: "chain", name } });
  }
  /** Adds a named counter (a no-op when it exists; its values stay). */
  counter(name: string): void {
    this.decls.push({ verb: "add", obj: { kind: "counter", name } });
  }
  /** Adds a set or map (a no-op when it exists with the same definition). */
  set(s: NftSet | NftMap): void {
    this.decls.push({ verb: "add", obj: s });
  }
  /** Empties a set or map. */
  flushSet(s: NftSet | NftMap): void {
    this.decls.push({ verb: "flush", obj: { ...s } });
  }

  /** Number of operations. */
  get size(): number {
    return this.decls.length + this.rules.length + this.dels.length + this.adds.length;
  }
}

/**
 * Collects a plan's units and cuts them into transactions: all at once
 * ({@link TxBuilder.finish}), or as they fill up ({@link TxBuilder.take}), so
 * a long plan never holds more than one transaction's operations.
 */
export class TxBuilder {
  /** Shared head: sets, maps and class chains everything else may use (first transaction). */
  readonly head = new Unit();
  /** Shared tail: flushes of chains that went away, and element changes owned by no unit. */
  readonly tail = new Unit();
  /**
   * Declarations and rules nothing else in the plan uses (class sets kept ready for later):
   * a transaction of their own after the rest ({@link TxBuilder.finish}), so they never delay
   * the elements.
   */
  readonly later = new Unit();
  #pending: Unit[] = [];
  #pendingSize = 0;
  #counted = 0;
  #withTable = false;
  #emitted = 0;

  /** Starts the first transaction with `add table` (full syncs). */
  withTable(): void {
    this.#withTable = true;
  }

  /** A new unit (one service port's operations). */
  unit(): Unit {
    const u = new Unit();
    this.#pending.push(u);
    return u;
  }

  /**
   * A transaction of the units so far once they hold at least `maxOps`
   * operations (with the head, for the first one), else undefined.
   */
  take(maxOps: number): Transaction | undefined {
    if (maxOps > 0 && this.#emitted === 0 && this.head.size > 0) {
      // The head alone first: declarations and rules go through libnftables,
      // then every chunk of elements can take the raw netlink path.
      return this.#cut(false, true);
    }
    for (; this.#counted < this.#pending.length; this.#counted++) {
      this.#pendingSize += this.#pending[this.#counted].size;
    }
    const size = this.#pendingSize + (this.#emitted === 0 ? this.head.size : 0);
    if (maxOps <= 0 || size < maxOps) return undefined;
    return this.#cut(false);
  }

  /**
   * The last transaction: what is pending, with the tail (none when nothing changes). With
   * `splitDeclarations`, a transaction that only adds declarations and rules (a class chain
   * used for the first time, the dispatch chains rewritten) besides its elements is cut in two:
   * the declarations first (libnftables), then the elements (raw netlink), so libnftables never
   * parses nor checks the elements against its cache. Only when that is safe: nothing is
   * deleted or emptied that an element still in place uses (a chain is flushed only to be
   * refilled in the same transaction).
   */
  finish(splitDeclarations = false): Transaction[] {
    const first = this.#emitted === 0;
    const tx = this.#cut(true);
    const later = new Transaction();
    for (const op of this.later.decls) later.ops.push(op);
    for (const op of this.later.rules) later.ops.push(op);
    const after = later.size > 0 ? [later] : [];
    // A full sync that changes nothing must not even re-add the table.
    if (tx.size === 0 || (first && this.#withTable && tx.size === 1)) return after;
    return [...(splitDeclarations ? splitAdds(tx) : [tx]), ...after];
  }

  #cut(last: boolean, headOnly = false): Transaction {
    const all = headOnly
      ? [this.head]
      : this.#emitted === 0
      ? [this.head, ...this.#pending]
      : [...this.#pending];
    if (last) all.push(this.tail);
    const tx = new Transaction();
    if (this.#emitted === 0 && this.#withTable) {
      tx.add({ kind: "table", comment: TABLE_COMMENT });
    }
    for (const u of all) for (const op of u.decls) tx.ops.push(op);
    for (const u of all) for (const op of u.rules) tx.ops.push(op);
    pushByTarget(tx, all.map((u) => u.dels));
    pushByTarget(tx, all.map((u) => u.adds));
    if (!headOnly) {
      this.#pending = [];
      this.#pendingSize = 0;
      this.#counted = 0;
    }
    this.#emitted++;
    return tx;
  }
}

/**
 * Appends element operations grouped by set (in order of first appearance):
 * the script renderer folds a run on one set into one command, which
 * libnftables parses far faster than many small ones.
 */
function pushByTarget(tx: Transaction, lists: Operation[][]): void {
  const byTarget = new Map<string, Operation[]>();
  for (const list of lists) {
    for (const op of list) {
      const e = op.obj as Element;
      const target = e.map ?? e.set ?? "";
      let l = byTarget.get(target);
      if (l === undefined) byTarget.set(target, l = []);
      l.push(op);
    }
  }
  for (const l of byTarget.values()) for (const op of l) tx.ops.push(op);
}

/** `tx` as declarations then elements (see {@link TxBuilder.finish}), or whole when unsafe. */
function splitAdds(tx: Transaction): Transaction[] {
  const decls = tx.ops.filter((o) => o.obj.kind !== "element");
  if (decls.length === 0 || decls.length === tx.ops.length) return [tx];
  const refilled = new Set(
    decls.filter((o) => o.obj.kind === "rule").map((o) => (o.obj as { chain: string }).chain),
  );
  const safe = decls.every((o) =>
    o.verb === "add" ||
    (o.verb === "flush" && o.obj.kind === "chain" && refilled.has(o.obj.name))
  );
  if (!safe) return [tx];
  const head = new Transaction(), elements = new Transaction();
  head.ops.push(...decls);
  elements.ops.push(...tx.ops.filter((o) => o.obj.kind === "element"));
  return [head, elements];
}
