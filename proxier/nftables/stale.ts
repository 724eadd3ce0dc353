/**
 * Deleting what went stale: chains no element or rule points at any more,
 * and then the sets and maps only those chains used.
 *
 * Why later and not in the sync that dropped them: on kernels before 6.2,
 * removing a verdict-map element that points at a chain does not drop the
 * chain's use count at commit; the element is released asynchronously, so a
 * `delete chain` in the same (or an immediately following) transaction fails
 * with EBUSY. Upstream kube-proxy hit exactly this (kubernetes#122604) and
 * deletes stale chains in a later sync; so do we, after `delayMs`.
 *
 * @module
 */
import { type Chain, type Set as NftSet, Transaction } from "../../ffi/nftables/types.ts";
import { classOfSet, classSetName, parseClassChain } from "./names.ts";
import { chainDigest } from "./plan/common.ts";
import { type ChainSpec, dispatchedClasses } from "./skeleton.ts";
import { type Delta, newDelta, type WrittenState } from "./written_state.ts";

/**
 * The class dispatch chains for the classes `left` (skeleton.ts classDispatchChains, bound to
 * the family's build context): a class chain's dispatch rule and frontends set stay while the
 * chain lingers stale, so a class that empties and fills again costs no rule write.
 */
export type DispatchFor = (left: readonly string[]) => ChainSpec[];

/** A stale-object deletion: its transaction and the delta to commit when it succeeds. */
export interface StalePlan {
  /** The deletions. */
  tx: Transaction;
  /** What to commit to the written state once the deletion succeeded. */
  delta: Delta;
  /** Chains it deletes. */
  chains: string[];
  /** Sets it deletes. */
  sets: string[];
  /** The rewrite of the dispatch chains that named deleted classes (the start of `tx`). */
  prelude: Transaction;
  /** Those dispatch chains, with their new digests. */
  rewrites: [string, string][];
}

/**
 * Plans deletion of what has been stale for at least `delayMs`, or null when nothing is due.
 * A class chain goes with its frontends set (a reserved one's set alone), after `dispatch`
 * rewrote the chains that named it.
 */
export function planStaleDeletion(
  written: WrittenState,
  now: number,
  delayMs: number,
  dispatch?: DispatchFor,
): StalePlan | null {
  const chains: string[] = [];
  for (const [name, at] of written.staleChains) {
    // A class chain may have been reused since.
    if ((written.classes.get(name) ?? 0) > 0) continue;
    if (now - at >= delayMs) chains.push(name);
  }
  const sets: string[] = [];
  for (const [name, at] of written.staleSets) {
    if (written.sets.has(name)) continue;
    if (now - at >= delayMs) sets.push(name);
  }
  const gone = new Set(chains.filter((c) => parseClassChain(c) !== undefined));
  for (const c of gone) {
    const set = classSetName(c);
    if (written.sets.has(set) && !sets.includes(set)) sets.push(set);
  }
  if (chains.length === 0 && sets.length === 0) return null;
  const tx = new Transaction();
  const delta = newDelta();
  const goneSets = new Set(sets.filter((s) => classOfSet(s) !== undefined));
  const rewrites = (gone.size > 0 || goneSets.size > 0) && dispatch
    ? dispatchRewrites(written, gone, goneSets, dispatch)
    : [];
  const prelude = new Transaction();
  for (const [c, digest] of rewrites) {
    prelude.add(c.chain).flush({ kind: "chain", name: c.chain.name } as Chain);
    for (const rule of c.rules) prelude.add({ kind: "rule", chain: c.chain.name, rule });
    delta.chains.set(c.chain.name, digest);
  }
  tx.ops.push(...prelude.ops);
  for (const name of chains) {
    tx.delete({ kind: "chain", name } as Chain);
    delta.staleChains.set(name, null);
    delta.chains.set(name, null);
  }
  // After the chains: a chain's rules may be what still used a set.
  for (const name of sets) {
    tx.delete({ kind: "set", name } as NftSet);
    delta.staleSets.set(name, null);
    delta.sets.set(name, null);
  }
  const named = rewrites.map(([c, digest]): [string, string] => [c.chain.name, digest]);
  return { tx, delta, chains, sets, prelude, rewrites: named };
}

/** The dispatch chains that change once the class chains `gone` and sets `goneSets` are deleted. */
function dispatchRewrites(
  written: WrittenState,
  gone: ReadonlySet<string>,
  goneSets: ReadonlySet<string>,
  dispatch: DispatchFor,
): [ChainSpec, string][] {
  const present = [...written.chains.keys(), ...written.staleChains.keys()];
  const left = dispatchedClasses(
    new Set(present.filter((c) => !gone.has(c))),
    (s) => !goneSets.has(s) && (written.sets.has(s) || written.staleSets.has(s)),
  );
  return dispatch(left).map((c): [ChainSpec, string] => [c, chainDigest(c)])
    .filter(([c, digest]) => written.chains.get(c.chain.name) !== digest);
}

/** One object of a stale deletion, in a transaction of its own. */
export interface StaleStep {
  /** What is deleted (`rewrite`: the dispatch chains first rewritten without it). */
  kind: "chain" | "set" | "rewrite";
  /** Its name. */
  name: string;
  /** The deletion alone. */
  tx: Transaction;
}

/** A {@link StaleStep} tried on its own; `inUse` when the kernel refused for another reason than "not found". */
export interface StaleTry extends StaleStep {
  /** The kernel refused it for another reason than "not found" (another program uses it). */
  inUse: boolean;
}

/** The objects of `p` one at a time (the dispatch rewrite, then chains), to try after its batch failed. */
export function staleSteps(p: StalePlan): StaleStep[] {
  const step = (kind: "chain" | "set", name: string): StaleStep => {
    const tx = new Transaction();
    tx.delete(kind === "chain" ? { kind, name } as Chain : { kind, name } as NftSet);
    return { kind, name, tx };
  };
  const rewrite: StaleStep[] = p.prelude.size === 0
    ? []
    : [{ kind: "rewrite", name: "class dispatch", tx: p.prelude }];
  return [
    ...rewrite,
    ...p.chains.map((n) => step("chain", n)),
    ...p.sets.map((n) => step("set", n)),
  ];
}

/**
 * The delta after each object was tried on its own: what is gone (deleted
 * now, or already) is forgotten; what is still in use (by someone else) is
 * tried again at `retryAt`. A rewrite that went through commits `rewrites`' digests.
 */
export function staleRetryDelta(
  tried: readonly StaleTry[],
  retryAt: number,
  rewrites: readonly [string, string][] = [],
): Delta {
  const d = newDelta();
  for (const t of tried) {
    if (t.kind === "rewrite") {
      if (!t.inUse) { for (const [name, digest] of rewrites) d.chains.set(name, digest); }
      continue;
    }
    const stale = t.kind === "chain" ? d.staleChains : d.staleSets;
    stale.set(t.name, t.inUse ? retryAt : null);
    if (t.kind === "chain" && !t.inUse) d.chains.set(t.name, null);
    if (t.kind === "set" && !t.inUse) d.sets.set(t.name, null);
  }
  return d;
}

/** Earliest time (engine clock) something stale becomes deletable, or undefined. */
export function nextStaleDeadline(written: WrittenState, delayMs: number): number | undefined {
  let min: number | undefined;
  for (const at of [...written.staleChains.values(), ...written.staleSets.values()]) {
    if (min === undefined || at < min) min = at;
  }
  return min === undefined ? undefined : min + delayMs;
}
