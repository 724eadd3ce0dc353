/**
 * What a {@link Proxier} is built with, what one sync takes and what it returns
 * (apart from the class, so proxier.ts holds the sync itself).
 *
 * @module
 */
import type { NftablesClient } from "../../ffi/nftables/types.ts";
import type { LogFn } from "../../net/log.ts";
import type { ProxierConfig, ProxyState, StaleReport } from "../model.ts";
import type { Drift } from "./drift.ts";

/** Settings of a Proxier. */
export interface ProxierOptions {
  /** Where this family's rules are written. */
  client: NftablesClient;
  /** Rule settings from the flags. */
  config: ProxierConfig;
  /** Delay between a chain going stale and its deletion (default 1000 ms; see stale.ts). */
  staleChainDelayMs?: number;
  /**
   * Cold start and regeneration: about this many operations per transaction
   * (0 = one transaction; default 25 000). Each transaction is built while the
   * previous one commits, so a bound keeps the peak down (at 30k Services
   * × 10, 292 MB with 50 000, 264-274 with 25 000, no lower with 12 500, at
   * the same cold start); services are never split.
   */
  maxOpsPerTransaction?: number;
  /**
   * Returns freed native memory to the OS after large transactions, then calls `then` (the
   * rehearsal that faults the partial path back in). Default: `mallocTrim`; `false` disables.
   */
  trimMemory?: ((then?: () => void) => void) | false;
  /** A full sync lists the hairpin set only while it should hold at most this many elements. */
  verifySetLimit?: number;
  /**
   * Polled during a full sync (after yielding to the event loop): return true
   * when a change is waiting. The full sync then steps aside once (result
   * `preempted`), and the next sync commits the waiting changes before
   * redoing the full sync, so a long full sync does not hold back a change.
   */
  shouldYield?: () => boolean;
  /** A preemptible full sync yields to the event loop after this many ms of work (default 50). */
  yieldEveryMs?: number;
  /** Monotonic clock in ms (default performance.now). */
  now?: () => number;
  /** Where warnings and drift are logged (default: nowhere). */
  log?: LogFn;
  /**
   * This host's interface addresses, read at each sync: nodePortAddresses CIDRs select among
   * them, as upstream's GetNodeIPs does. Undefined (or returning undefined): CIDRs select among
   * the Node object's addresses (dry runs, the tracer, unit tests).
   */
  hostAddresses?: () => readonly string[] | undefined;
}

/** What one family's changes look like (ClusterState's FamilySync plus the node flag). */
export interface ProxierInput {
  /** This family's whole cluster state. */
  state: ProxyState;
  /** Service port ids whose info or endpoints changed. */
  changed: ReadonlySet<string>;
  /** Service port ids that are gone. */
  deleted: ReadonlySet<string>;
  /** Conntrack work the changes make necessary. */
  stale: StaleReport;
  /** Node labels/IPs/podCIDRs or ServiceCIDRs changed: forces a full sync. */
  contextChanged?: boolean;
}

/** Result of a committed sync. */
export interface SyncResult {
  /** Whether this was a full sync (the whole ruleset compared with the kernel). */
  full: boolean;
  /** Operations applied (all transactions, stale deletion included). */
  ops: number;
  /** Transactions run. */
  txs: number;
  /** Wall time of the sync, in seconds. */
  seconds: number;
  /** Conntrack work now due (accumulated across failed syncs). */
  stale: StaleReport;
  /** Stale chains deleted by this sync. */
  deletedChains: number;
  /** When set, run another sync after this many ms (pending stale deletion). */
  followUpMs?: number;
  /**
   * True when a full sync stepped aside because `shouldYield` said a change
   * was waiting: nothing else was done; run the next sync at once.
   */
  preempted?: boolean;
  /**
   * A full sync over a trusted written state: what the kernel had that this
   * proxier did not write (another program's changes, which it repaired).
   */
  drift?: Drift;
}
