/**
 * The one seam between the sync engine and conntrack: the stale-flow cleanup
 * after a sync and the periodic reconcile. Production runs both on a Worker
 * ({@link ReconcileWorker}, conntrack/worker.ts: a dump of a large table would
 * block the event loop); {@link InlineConntrack} runs the same functions on
 * the calling thread, for tests that want a fake client or every deleted entry.
 *
 * @module
 */
import type { ConntrackClient } from "../ffi/conntrack/types.ts";
import type { IpFamily } from "../net/family.ts";
import type { ProxyState, StaleReport } from "../proxier/model.ts";
import { type CleanupResult, cleanupStale } from "./cleanup.ts";
import { reconcile, type ReconcileResult } from "./reconciler.ts";
import { ReconcileWorker } from "./worker.ts";

/** Where conntrack work runs. */
export interface ConntrackRunner {
  /** Deletes the flows a committed sync made stale. */
  cleanup(family: IpFamily, report: StaleReport): Promise<CleanupResult>;
  /** Deletes the flows no programmed rule explains any more. */
  reconcile(family: IpFamily, state: ProxyState): Promise<ReconcileResult>;
  /**
   * A sync committed `state`, changing or deleting the service ports `ids` since the last call:
   * lets the runner keep its reconcile index up to date in O(ids). Optional: without it the
   * index is built from the whole state at each reconcile.
   */
  updateIndex?(family: IpFamily, state: ProxyState, ids: Iterable<string>): void;
  /** Releases the thread or client; pending work fails. */
  close(): void;
}

/** Production's runner: both jobs on the conntrack Worker thread. */
export function workerConntrack(): ConntrackRunner {
  return new ReconcileWorker();
}

/** Both jobs on this thread, through one client opened on first use (and again after an error). */
export class InlineConntrack implements ConntrackRunner {
  readonly #open: () => ConntrackClient;
  #client: ConntrackClient | undefined;

  /** `open` is called on first use and again after a client error. */
  constructor(open: () => ConntrackClient) {
    this.#open = open;
  }

  cleanup(family: IpFamily, report: StaleReport): Promise<CleanupResult> {
    return this.#run((c) => cleanupStale(c, report, family));
  }

  reconcile(family: IpFamily, state: ProxyState): Promise<ReconcileResult> {
    return this.#run((c) => reconcile(c, family, state));
  }

  close(): void {
    this.#client?.close();
    this.#client = undefined;
  }

  #run<T>(job: (c: ConntrackClient) => T): Promise<T> {
    try {
      this.#client ??= this.#open();
      return Promise.resolve(job(this.#client));
    } catch (err) {
      // A client that failed mid-dump is not trusted again.
      this.close();
      return Promise.reject(err);
    }
  }
}
