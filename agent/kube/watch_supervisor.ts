/**
 * The supervised list and watch of one resource ({@link WatchSupervisor}); the proxy's four
 * informers are built from it in `informers.ts`.
 *
 * client-node's informer (ListWatch) stops for good on an HTTP 500 or a failed list, a watch
 * the server closes can die silently (platform notes), it re-lists whenever a watch ends, and
 * it keeps a second copy of every object. {@link WatchSupervisor} runs its own list and watch
 * (paged lists and watches over native fetch) and:
 * - restarts it with capped exponential backoff (1 s .. 30 s by default) after an error;
 * - asks for BOOKMARK events and runs a watchdog: no event or bookmark for `watchdogMs` ->
 *   restart;
 * - on a restart (a fresh list), delivers only the difference against what it delivered
 *   before (adds, updates with the old object, deletes), so consumers stay exactly current;
 * - resumes a watch the server ended from the last resourceVersion seen, as client-go does,
 *   and re-lists only after an error or 410 Gone;
 * - keeps only a compact identity string per object when told to (`stub`), so the consumer
 *   holds the only full copy;
 * - reports `synced` and per-resource health (for /healthz).
 * Objects are delivered as plain API JSON (list results are normalised to match watch events).
 * @module
 */
import type { Logger } from "../log.ts";
import { NativeWatch } from "./native_watch.ts";
import type { ApiFetch } from "./api_fetch.ts";
import type { ListStream } from "./paged_list.ts";
import { errText, statusOf } from "./api_probe.ts";
import { tooLargeResourceVersion, VersionTrail, WENT_BACK } from "./resource_version.ts";

/** Callbacks of a supervised informer. */
export interface InformerHandlers<T> {
  /** A new object. */
  onAdd(obj: T): void;
  /** A changed object (resourceVersion differs), with the previously delivered version. */
  onUpdate(oldObj: T, newObj: T): void;
  /** A removed object (its last known state). */
  onDelete(obj: T): void;
  /** The first complete list has been delivered (called once). */
  onSynced?(): void;
}

/** What the supervisor reads of an API object. */
export interface KubeObject {
  /** Identity and version. */
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
}

/** A list response (client-node's typed lists fit it too). */
export interface KubeList<T> {
  /** The list's resourceVersion. */
  metadata?: { resourceVersion?: string };
  /** The objects. */
  items: T[];
}

/**
 * Lists the resource with the given selectors, as plain API JSON (slim, when the supervisor
 * slims). `resourceVersion` "0" lets the API server answer from its watch cache (as
 * client-go's first list does); a re-list asks for data not older than what was already seen.
 * A list function that can hands each page to `stream` as it arrives (and returns no items);
 * one that cannot returns them all.
 */
export type ListFn<T> = (
  opts: {
    labelSelector?: string;
    fieldSelector?: string;
    resourceVersion?: string;
    resourceVersionMatch?: string;
  },
  stream?: ListStream<T & KubeObject>,
) => Promise<KubeList<T & KubeObject>>;

/** Options of {@link WatchSupervisor}. */
export interface WatchSupervisorOptions<T> {
  /** Resource name used in logs and health ("services"). */
  name: string;
  /** The API server connection. */
  api: ApiFetch;
  /** Watch path, e.g. "/api/v1/services". */
  path: string;
  /** List call. */
  list: ListFn<T>;
  /** Label selector for list and watch. */
  labelSelector?: string;
  /** Field selector for list and watch. */
  fieldSelector?: string;
  /** Event callbacks. */
  handlers: InformerHandlers<T>;
  /** Health reports: false while the list/watch is failing, true once it works again. */
  onHealth?: (name: string, ok: boolean) => void;
  /** Logger. */
  log?: Logger;
  /** First restart delay; default 1000 ms. */
  initialBackoffMs?: number;
  /** Cap of the restart delay; default 30000 ms. */
  maxBackoffMs?: number;
  /** Restart when no event or bookmark arrived for this long; default 300000 ms. */
  watchdogMs?: number;
  /** Interval of the "still waiting" warning while a list is unanswered; default 10 s. */
  slowListWarnMs?: number;
  /** A 404 on list means the API does not exist: log once, report synced and empty, stop. */
  optional?: boolean;
  /**
   * Reduces every object (listed or watched) to what the consumers read,
   * before anything keeps it (default: keep objects whole).
   */
  slim?: (o: Record<string, unknown>) => Record<string, unknown>;
  /**
   * Keeps a compact string per delivered object instead of the object (default: the object
   * itself), rebuilt into the old object handed to updates and deletes: the only copy of what
   * the object says is the consumer's.
   */
  stub?: Stub;
}

/** A delivered object kept as one string ({@link WatchSupervisorOptions.stub}). */
export interface Stub {
  /** The string kept for `o`; it carries at least the resourceVersion. */
  pack(o: Record<string, unknown>): string;
  /** The resourceVersion a packed string carries. */
  version(packed: string): string | undefined;
  /** The old object handed to handlers, from the object's key ("namespace/name") and string. */
  unpack(key: string, packed: string): Record<string, unknown>;
}

type Obj = KubeObject;

/** Watch event types (besides ERROR) of the Kubernetes API. */
const KNOWN_EVENTS = new Set(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]);

function keyOf(o: Obj): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
}

/** One informer with restart, watchdog and diff-on-relist. */
export class WatchSupervisor<T> {
  readonly #o: WatchSupervisorOptions<T>;
  readonly #initialBackoff: number;
  readonly #maxBackoff: number;
  readonly #watchdogMs: number;
  /** What was delivered, by key: the object, or its {@link Stub} string. */
  readonly #delivered = new Map<string, T | string>();
  #gen = 0;
  #abort?: AbortController;
  #lastActivity = 0;
  #failures = 0;
  #needReset = false;
  #restartTimer?: ReturnType<typeof setTimeout>;
  #watchdog?: ReturnType<typeof setInterval>;
  #stopped = true;
  #synced = false;
  #healthy = false;
  #watching = false;
  #restarts = 0;
  /** Newest resourceVersion seen (list or event); "" forces a quorum read from etcd. */
  #lastRv = "0";
  /** Says so when the server's resourceVersion goes back (a restore from a backup). */
  #versions = new VersionTrail((f) =>
    this.#o.log?.warn(WENT_BACK, { resource: this.#o.name, ...f })
  );

  /** Creates the supervisor; call {@link start}. */
  constructor(opts: WatchSupervisorOptions<T>) {
    this.#o = opts;
    this.#initialBackoff = opts.initialBackoffMs ?? 1000;
    this.#maxBackoff = opts.maxBackoffMs ?? 30_000;
    this.#watchdogMs = opts.watchdogMs ?? 300_000;
  }

  /** Resource name. */
  get name(): string {
    return this.#o.name;
  }

  /** True once the first full list was delivered. */
  get synced(): boolean {
    return this.#synced;
  }

  /** True while the list/watch works. */
  get healthy(): boolean {
    return this.#healthy;
  }

  /** How many times the informer was restarted (errors and watchdog). */
  get restarts(): number {
    return this.#restarts;
  }

  /** The objects delivered so far (current view), keyed "namespace/name". */
  snapshot(): Map<string, T> {
    return new Map([...this.#delivered].map(([k, v]) => [k, this.#unpack(k, v)]));
  }

  /** Starts listing and watching. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#watchdog = setInterval(
      () => this.#checkWatchdog(),
      Math.max(10, Math.min(this.#watchdogMs / 4, 5000)),
    );
    this.#launch();
  }

  /** Stops for good. */
  stop(): Promise<void> {
    this.#stopped = true;
    this.#gen++;
    clearTimeout(this.#restartTimer);
    clearInterval(this.#watchdog);
    this.#abort?.abort();
    this.#abort = undefined;
    return Promise.resolve();
  }

  #launch(): void {
    const gen = ++this.#gen;
    this.#watching = false;
    this.#run(gen).catch((err) => gen === this.#gen && this.#onError(err));
  }

  /**
   * List, deliver the difference, then watch from the list's version until something fails.
   * 410 Gone from the watch is routine (the version was compacted away): list again at once.
   */
  async #run(gen: number): Promise<void> {
    for (;;) {
      await this.#listOnce(gen);
      try {
        // As client-go's reflector: a watch the server ends cleanly resumes from the last
        // version seen, without a new list.
        while (gen === this.#gen) await this.#watchOnce(gen);
        return;
      } catch (err) {
        if (gen !== this.#gen || statusOf(err) !== 410) throw err;
        this.#o.log?.info("Watch expired (410 Gone); listing again", { resource: this.#o.name }, 2);
        this.#lastRv = "";
      }
    }
  }

  async #listOnce(gen: number): Promise<void> {
    const o = this.#o;
    const rv = this.#lastRv;
    // A slow list is waited for (the rules already programmed keep serving), but said.
    const started = Date.now();
    const slow = setInterval(() => {
      if (gen !== this.#gen) return;
      o.log?.warn("Listing is slow; still waiting for the API server", {
        resource: o.name,
        waitedSeconds: Math.round((Date.now() - started) / 1000),
      });
    }, o.slowListWarnMs ?? 10_000);
    // Pages are delivered as they arrive (adds and updates at once; deletes once the whole
    // list is known), so the consumer's parsing overlaps the transfer of the next page.
    // What the list holds is noted only when something delivered before could be missing
    // from it: not on the first list (nothing delivered yet), unless the list starts over.
    const seen = new Set<string>();
    let noting = this.#delivered.size > 0;
    const deliver = (items: readonly Obj[]) => {
      if (gen !== this.#gen) throw new Error(`${o.name}: list superseded by a restart`);
      this.#activity();
      for (const item of items) {
        const key = keyOf(item);
        if (noting) seen.add(key);
        this.#onAddOrUpdate(key, item);
      }
    };
    const restart = () => {
      noting = true;
      seen.clear();
    };
    let res;
    try {
      res = await o.list({
        labelSelector: o.labelSelector,
        fieldSelector: o.fieldSelector,
        ...(rv === "" ? {} : { resourceVersion: rv }),
        ...(rv === "" || rv === "0" ? {} : { resourceVersionMatch: "NotOlderThan" }),
      }, { page: deliver, restart });
    } finally {
      clearInterval(slow);
    }
    if (gen !== this.#gen) return;
    deliver((res as KubeList<Obj>).items);
    const listed = res.metadata?.resourceVersion;
    if (listed) this.#versions.note(this.#lastRv = listed, "list");
    // Whatever was delivered before and the fresh list lacks is gone.
    for (const [key, kept] of noting ? [...this.#delivered] : []) {
      if (!seen.has(key)) {
        this.#delivered.delete(key);
        o.handlers.onDelete(this.#unpack(key, kept));
      }
    }
    if (!this.#synced) {
      this.#synced = true;
      o.log?.info("Informer synced", { resource: o.name, objects: this.#delivered.size }, 2);
      o.handlers.onSynced?.();
    }
    this.#needReset = true;
    this.#setHealthy(true);
  }

  /** One watch request, until the server ends it; rejects on any failure. */
  #watchOnce(gen: number): Promise<void> {
    const o = this.#o;
    return new Promise<void>((resolve, reject) => {
      const watch = new NativeWatch(
        o.api,
        (line) =>
          o.log?.warn("Watch sent a line that is not JSON; skipped", {
            resource: o.name,
            line: line.length > 120 ? line.slice(0, 120) + "..." : line,
          }),
      );
      const done = (err: unknown) => (err ? reject(err) : resolve());
      const onEvent = (phase: string, obj: unknown) => {
        if (gen !== this.#gen) return;
        this.#activity();
        if (phase === "ERROR") {
          // A Status in the stream, typically 410 Gone: the version is compacted away.
          const st = obj as { code?: number; message?: string } | null;
          done(Object.assign(new Error(st?.message ?? "watch error"), { code: st?.code }));
          return;
        }
        if (!KNOWN_EVENTS.has(phase) || obj === null || typeof obj !== "object") {
          o.log?.warn("Watch sent an event this agent does not understand; skipped", {
            resource: o.name,
            type: phase,
            object: obj === null ? "null" : typeof obj,
          });
          return;
        }
        const rv = (obj as Obj).metadata?.resourceVersion;
        if (rv) this.#versions.note(this.#lastRv = rv, "watch event");
        if (phase === "BOOKMARK") return;
        const item = (o.slim ? o.slim(obj as Record<string, unknown>) : obj) as Obj;
        if (phase === "DELETED") this.#onDelete(item);
        else this.#onAddOrUpdate(keyOf(item), item);
      };
      watch.watch(
        o.path,
        {
          labelSelector: o.labelSelector,
          fieldSelector: o.fieldSelector,
          resourceVersion: this.#lastRv,
          allowWatchBookmarks: true,
        },
        onEvent,
        done,
      ).then((ctrl) => {
        if (gen !== this.#gen) ctrl.abort();
        else {
          this.#abort = ctrl;
          this.#watchStarted();
        }
      }, reject);
    });
  }

  #onAddOrUpdate(key: string, obj: Obj): void {
    const t = obj as unknown as T;
    const old = this.#delivered.get(key);
    const stub = this.#o.stub;
    const keep = stub ? stub.pack(obj as Record<string, unknown>) : t;
    if (old === undefined) {
      this.#delivered.set(key, keep);
      this.#o.handlers.onAdd(t);
    } else if (this.#versionOf(old) !== obj.metadata?.resourceVersion) {
      this.#delivered.set(key, keep);
      this.#o.handlers.onUpdate(this.#unpack(key, old), t);
    }
  }

  /** The resourceVersion of a kept object. */
  #versionOf(kept: T | string): string | undefined {
    return typeof kept === "string" && this.#o.stub
      ? this.#o.stub.version(kept)
      : (kept as Obj).metadata?.resourceVersion;
  }

  /** The object handed back for a kept one. */
  #unpack(key: string, kept: T | string): T {
    return typeof kept === "string" && this.#o.stub
      ? this.#o.stub.unpack(key, kept) as T
      : kept as T;
  }

  #onDelete(obj: Obj): void {
    const key = keyOf(obj);
    if (!this.#delivered.has(key)) return;
    this.#delivered.delete(key);
    this.#o.handlers.onDelete(obj as unknown as T);
  }

  #watchStarted(): void {
    this.#watching = true;
    this.#lastActivity = Date.now();
    this.#setHealthy(true);
  }

  #activity(): void {
    this.#lastActivity = Date.now();
    // The watch delivers: the restart cycle is over, so the next failure starts at 1 s again.
    if (this.#needReset) {
      this.#needReset = false;
      this.#failures = 0;
    }
  }

  #setHealthy(ok: boolean): void {
    if (this.#healthy === ok) return;
    this.#healthy = ok;
    this.#o.onHealth?.(this.#o.name, ok);
  }

  #onError(err: unknown): void {
    if (this.#stopped) return;
    const code = statusOf(err);
    if (tooLargeResourceVersion(err)) {
      // It went back: as client-go does, list what it has now rather than wait for it.
      this.#o.log?.warn(
        "The API server has not reached the resourceVersion this agent saw: it went back " +
          "(restored from a backup?); listing its current state",
        { resource: this.#o.name, resourceVersion: this.#lastRv, err: errText(err) },
      );
      this.#lastRv = "";
    }
    if (code === 404 && this.#o.optional && !this.#synced) {
      this.#o.log?.info("API resource not served; continuing without it", {
        resource: this.#o.name,
        path: this.#o.path,
      });
      this.#synced = true;
      this.#setHealthy(true);
      this.#o.handlers.onSynced?.();
      void this.stop();
      return;
    }
    // 410 on a list: the version we asked for is compacted away; read the latest instead.
    if (code === 410) this.#lastRv = "";
    this.#restart(`list/watch failed: ${errText(err)}`);
  }

  #checkWatchdog(): void {
    if (this.#stopped || !this.#watching) return;
    const idle = Date.now() - this.#lastActivity;
    if (idle >= this.#watchdogMs) {
      this.#restart(`no watch event or bookmark for ${Math.round(idle / 1000)}s`);
    }
  }

  /** Restarts the watch at once (a fresh list, delivered as a diff), skipping any backoff. */
  restart(reason: string): void {
    this.#failures = 0;
    this.#restart(reason);
  }

  #restart(reason: string): void {
    if (this.#stopped) return;
    this.#gen++; // silences callbacks of the old list/watch, including its AbortError
    this.#watching = false;
    this.#abort?.abort();
    this.#abort = undefined;
    this.#setHealthy(false);
    const delay = Math.min(this.#maxBackoff, this.#initialBackoff * 2 ** this.#failures);
    this.#failures++;
    this.#restarts++;
    this.#o.log?.warn("Restarting informer", { resource: this.#o.name, reason, delayMs: delay });
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => {
      if (!this.#stopped) this.#launch();
    }, delay);
  }
}
