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
import { type Delta, newDelta, type WrittenState } from "./written_state.ts";

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
}

/** Plans deletion of what has been stale for at least `delayMs`, or null when nothing is due. */
export function planStaleDeletion(
  written: WrittenState,
  now: number,
  delayMs: number,
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
  if (chains.length === 0 && sets.length === 0) return null;
  const tx = new Transaction();
  const delta = newDelta();
  for (const name of chains) {
    tx.delete({ kind: "chain", name } as Chain);
    delta.staleChains.set(name, null);
    delta.chains.set(name, null);
  }
  // After the chains: a chain's rules may be what still used a set.
  for (const name of sets) {
    tx.delete({ kind: "set", name } as NftSet);
    delta.staleSets.set(name, null);
  }
  return { tx, delta, chains, sets };
}

/** One object of a stale deletion, in a transaction of its own. */
export interface StaleStep {
  /** What is deleted. */
  kind: "chain" | "set";
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

/** The objects of `p` one at a time (chains first), to try after its batch failed. */
export function staleSteps(p: StalePlan): StaleStep[] {
  const step = (kind: "chain" | "set", name: string): StaleStep => {
    const tx = new Transaction();
    tx.delete(kind === "chain" ? { kind, name } as Chain : { kind, name } as NftSet);
    return { kind, name, tx };
  };
  return [...p.chains.map((n) => step("chain", n)), ...p.sets.map((n) => step("set", n))];
}

/**
 * The delta after each object was tried on its own: what is gone (deleted
 * now, or already) is forgotten; what is still in use (by someone else) is
 * tried again at `retryAt`.
 */
export function staleRetryDelta(tried: readonly StaleTry[], retryAt: number): Delta {
  const d = newDelta();
  for (const t of tried) {
    const stale = t.kind === "chain" ? d.staleChains : d.staleSets;
    stale.set(t.name, t.inUse ? retryAt : null);
    if (t.kind === "chain" && !t.inUse) d.chains.set(t.name, null);
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
