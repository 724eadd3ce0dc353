/**
 * Runs the conntrack reconcile on a Worker thread. Dump callbacks are
 * synchronous, so on the main thread a million-entry table would block the
 * event loop (health checks, metrics, informers) for seconds. The Worker
 * opens its own conntrack client (its own dlopen and netlink sockets) per
 * request, and posts counts back. The frontend index follows the syncs: before
 * each reconcile the main thread posts the entries of the service ports the
 * syncs changed ({@link ReconcileWorker.updateIndex}), the Worker keeps them and builds the
 * index itself, so a reconcile costs the event loop nothing that grows with the
 * cluster.
 *
 * This module is both sides: imported normally it exports
 * {@link ReconcileWorker}; started as a Worker with {@link WORKER_NAME} it
 * serves requests. The Worker is started from this module's own URL, which
 * in the bundled artefact is the whole program: main.ts therefore stays idle
 * when {@link isReconcileWorkerThread} (and the FFI client is a static
 * import, since no source file sits beside the bundle to import lazily).
 *
 * @module
 */

import { openConntrack } from "../ffi/conntrack/client.ts";
import type { ConntrackClient } from "../ffi/conntrack/types.ts";
import type { IpFamily } from "../net/family.ts";
import type { ProxyState, StaleReport } from "../proxier/model.ts";
import { type CleanupResult, cleanupStale } from "./cleanup.ts";
import {
  buildFrontendIndex,
  type FrontendIndex,
  type ReconcileOptions,
  type ReconcileResult,
  reconcileWithIndex,
} from "./reconciler.ts";
import { IndexEntries, type IndexUpdate, indexUpdate } from "./frontend_index.ts";

/** Name given to the Worker; the module serves requests only under it. */
export const WORKER_NAME = "knp-conntrack-reconciler";

/**
 * How the Worker obtains its client: `"ffi"`, the real one (`openConntrack()`),
 * or `module`'s export `factory` called with `args` (structured-cloneable),
 * which must return a ConntrackClient: how unit tests put a fake on the thread.
 */
export type WorkerClientSpec = "ffi" | {
  module: string;
  factory: string;
  args: unknown[];
};

/** True on the thread a {@link ReconcileWorker} started. */
export function isReconcileWorkerThread(): boolean {
  return (globalThis as { name?: unknown }).name === WORKER_NAME;
}

interface Request {
  id: number;
  /** Entries for the Worker's copy of the index (no reply), or... */
  update?: IndexUpdate;
  /** ...a reconcile over the index of the entries kept, or... */
  kept?: { family: IpFamily; serviceCIDRs: string[]; nodePortIPs?: readonly string[] };
  /** ...a reconcile over this index, or... */
  index?: FrontendIndex;
  /** ...a post-sync cleanup of this report. */
  cleanup?: { family: IpFamily; report: StaleReport };
  chunkSize?: number;
  client: WorkerClientSpec;
}

type Reply =
  | { id: number; kind: "log"; msg: string }
  | { id: number; kind: "done"; result: ReconcileResult | CleanupResult }
  | { id: number; kind: "error"; error: string };

/** Options of {@link ReconcileWorker}. */
export interface ReconcileWorkerOptions {
  /** Client the Worker opens. Default `"ffi"`. */
  client?: WorkerClientSpec;
}

/**
 * A long-lived Worker that reconciles on request. Requests run one at a
 * time, in order. Call {@link ReconcileWorker.close} when done.
 */
export class ReconcileWorker {
  private worker: Worker | undefined;
  private nextId = 1;
  private queue: Promise<unknown> = Promise.resolve();
  private pending = new Map<
    number,
    // deno-lint-ignore no-explicit-any
    { resolve: (r: any) => void; reject: (e: Error) => void; log?: (m: string) => void }
  >();
  private readonly client: WorkerClientSpec;
  private closed = false;
  /** Families whose entries the current thread holds (a fresh thread holds none), with the
   * ServiceCIDRs the entries were made with (see indexUpdate). */
  private readonly fed = new Map<IpFamily, string>();

  /** Prepares a worker; the thread starts on the first request. */
  constructor(opts: ReconcileWorkerOptions = {}) {
    this.client = opts.client ?? "ffi";
  }

  /**
   * Reconciles one family off the main thread. The index is built here (it
   * validates the state and throws on bad input before anything is posted).
   */
  reconcile(
    family: IpFamily,
    state: ProxyState,
    opts: ReconcileOptions = {},
  ): Promise<ReconcileResult> {
    if (state.family !== family) {
      return Promise.reject(
        new Error(`reconcile: state is for IPv${state.family} but IPv${family} was asked for`),
      );
    }
    if (this.fed.get(family) === state.serviceCIDRs.join(",")) {
      const kept = { family, serviceCIDRs: [...state.serviceCIDRs], nodePortIPs: opts.nodePortIPs };
      return this.#enqueue(() => this.#send({ kept }, opts));
    }
    let index: FrontendIndex;
    try {
      index = buildFrontendIndex(state, opts);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#enqueue(() => this.#send({ index }, opts));
  }

  /**
   * A sync committed `state` for `family`: posts the entries of `ids` (the service port ids it
   * changed or deleted since the last call) to the thread's copy of the index; all of them the
   * first time, or after the thread was restarted. O(ids) on this thread. Throws, before
   * posting, on an address that is not an IP.
   */
  updateIndex(family: IpFamily, state: ProxyState, ids: Iterable<string>): void {
    if (this.closed) return;
    let update: IndexUpdate;
    const ranges = state.serviceCIDRs.join(",");
    try {
      // Entries leave out ClusterIPs inside the ServiceCIDRs: new ServiceCIDRs, new entries.
      update = indexUpdate(state, this.fed.get(family) === ranges ? ids : undefined);
    } catch (err) {
      // The thread's copy would miss this sync: reconciles build from the state until a reset.
      this.fed.delete(family);
      throw err;
    }
    const worker = this.#start();
    // Messages are handled in order, so a reconcile posted later sees this update.
    worker.postMessage({ id: 0, update, client: this.client } satisfies Request);
    this.fed.set(family, ranges);
  }

  /**
   * Deletes the flows a sync made stale (conntrack/cleanup.ts) off the main
   * thread: its dump walks the whole UDP table of the family.
   */
  cleanup(family: IpFamily, report: StaleReport): Promise<CleanupResult> {
    return this.#enqueue(() => this.#send({ cleanup: { family, report } }, {}));
  }

  #enqueue<T>(job: () => Promise<T>): Promise<T> {
    const run = this.queue.then(job);
    this.queue = run.catch(() => {});
    return run;
  }

  /** Stops the thread for good; pending and queued requests fail. */
  close(): void {
    this.closed = true;
    this.fed.clear();
    this.worker?.terminate();
    this.worker = undefined;
    this.#failAll(new Error("conntrack reconcile worker closed"));
  }

  #send<T>(
    job: Pick<Request, "index" | "kept" | "cleanup">,
    opts: ReconcileOptions,
  ): Promise<T> {
    if (this.closed) return Promise.reject(new Error("conntrack reconcile worker closed"));
    const worker = this.#start();
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, log: opts.log });
      const req: Request = { id, ...job, chunkSize: opts.chunkSize, client: this.client };
      worker.postMessage(req);
    });
  }

  #start(): Worker {
    if (this.worker !== undefined) return this.worker;
    const w = new Worker(import.meta.url, { type: "module", name: WORKER_NAME });
    w.onmessage = (ev: MessageEvent<Reply>) => {
      const r = ev.data;
      const p = this.pending.get(r.id);
      if (p === undefined) return;
      if (r.kind === "log") {
        p.log?.(r.msg);
        return;
      }
      this.pending.delete(r.id);
      if (r.kind === "done") p.resolve(r.result);
      else p.reject(new Error(`conntrack reconcile worker: ${r.error}`));
    };
    w.onerror = (ev: ErrorEvent) => {
      ev.preventDefault();
      // The thread is unusable after an uncaught error: start a fresh one next time (which
      // gets every entry again).
      this.worker?.terminate();
      this.worker = undefined;
      this.fed.clear();
      this.#failAll(new Error(`conntrack reconcile worker crashed: ${ev.message}`));
    };
    this.worker = w;
    return w;
  }

  #failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

async function openClient(spec: WorkerClientSpec): Promise<ConntrackClient> {
  if (spec === "ffi") return openConntrack();
  const mod = await import(spec.module) as Record<string, unknown>;
  const factory = mod[spec.factory];
  if (typeof factory !== "function") {
    throw new Error(`${spec.module} has no function export ${spec.factory}`);
  }
  return factory(...spec.args) as ConntrackClient;
}

/** Worker side: the entries the main thread posted, per family. */
const kept = new IndexEntries();

/** Worker side: open the client, reconcile, close, reply. */
async function serve(req: Request, post: (r: Reply) => void): Promise<void> {
  let client: ConntrackClient | undefined;
  try {
    client = await openClient(req.client);
    // Built now, after the await: the entries of every sync committed so far count.
    const index = req.index ??
      (req.kept === undefined ? undefined : kept.index(req.kept.family, req.kept.serviceCIDRs, {
        nodePortIPs: req.kept.nodePortIPs,
      }));
    const result = req.cleanup !== undefined
      ? cleanupStale(client, req.cleanup.report, req.cleanup.family)
      : reconcileWithIndex(client, index!, {
        chunkSize: req.chunkSize,
        log: (msg) => post({ id: req.id, kind: "log", msg }),
      });
    post({ id: req.id, kind: "done", result });
  } catch (err) {
    post({ id: req.id, kind: "error", error: err instanceof Error ? err.message : String(err) });
  } finally {
    client?.close();
  }
}

const scope = globalThis as unknown as {
  name?: string;
  onmessage: ((ev: MessageEvent<Request>) => void) | null;
  postMessage(msg: Reply): void;
};
if (isReconcileWorkerThread() && typeof scope.postMessage === "function") {
  scope.onmessage = (ev) => {
    if (ev.data.update !== undefined) kept.apply(ev.data.update);
    else void serve(ev.data, (r) => scope.postMessage(r));
  };
}
