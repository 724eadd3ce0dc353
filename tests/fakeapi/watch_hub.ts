/**
 * The fake API server's watches (tests/fakeapi/server.ts): the event history, the open
 * streams, and what each stream is sent: a replay from a resourceVersion, synthetic ADDED
 * events for a watch from now, selector transitions as ADDED / DELETED, BOOKMARKs, the 410 of
 * a compacted version, and a server-side timeout.
 * @module
 */
import type { Filter } from "./selectors.ts";
import { type KObject, type ResourceInfo, status } from "./resources.ts";

/** One stored change of an object. */
export interface StoredEvent {
  rv: number;
  kind: string;
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: KObject;
  /** Previous version, for selector transitions. */
  prev?: KObject;
}

interface Watcher {
  kind: string;
  /** Events and bookmarks up to this resourceVersion are not sent (a watch from the future). */
  after: number;
  filter: Filter;
  controller: ReadableStreamDefaultController<Uint8Array>;
  bookmarks: boolean;
  timer?: ReturnType<typeof setInterval>;
  timeout?: ReturnType<typeof setTimeout>;
  closed: boolean;
}

/** What the hub reads of the server's store. */
export interface WatchSource {
  /** The current global resourceVersion. */
  rv(): number;
  /** The stored objects of a kind. */
  objects(kind: string): Iterable<KObject>;
}

const enc = new TextEncoder();

/** The open watch streams and the event history they replay from. */
export class WatchHub {
  #compactedRv = 0;
  #events: StoredEvent[] = [];
  readonly #watchers = new Set<Watcher>();
  readonly #source: WatchSource;
  readonly #bookmarkMs: number;

  /** A hub over `source`, sending BOOKMARKs every `bookmarkMs` where asked. */
  constructor(source: WatchSource, bookmarkMs: number) {
    this.#source = source;
    this.#bookmarkMs = bookmarkMs;
  }

  /** Number of open watch streams. */
  get size(): number {
    return this.#watchers.size;
  }

  /** Forgets the history up to `rv`: watches from an older version get 410 Gone. */
  compact(rv: number): void {
    this.#compactedRv = rv;
    this.#events = [];
  }

  /** Records an event and sends it to every watch of its kind. */
  emit(ev: StoredEvent): void {
    this.#events.push(ev);
    for (const w of this.#watchers) if (w.kind === ev.kind) this.#deliver(w, ev);
  }

  /** Ends every open stream: cleanly, or with `abort` as a cut connection. */
  dropAll(abort = false): void {
    for (const w of [...this.#watchers]) this.#close(w, abort);
  }

  /** Writes `line` (plus a newline) as it is to every open watch of `kind`. */
  sendRaw(kind: string, line: string): void {
    for (const w of this.#watchers) {
      if (w.kind !== kind || w.closed) continue;
      try {
        w.controller.enqueue(enc.encode(line + "\n"));
      } catch {
        this.#close(w);
      }
    }
  }

  /** Answers a watch request of `info` with the parameters of its query. */
  open(info: ResourceInfo, filter: Filter, params: URLSearchParams): Response {
    const rvParam = params.get("resourceVersion") ?? "";
    const from = rvParam === "" || rvParam === "0" ? undefined : Number(rvParam);
    if (from !== undefined && !Number.isFinite(from)) {
      return status(400, "BadRequest", `invalid resourceVersion "${rvParam}"`);
    }
    const bookmarks = params.get("allowWatchBookmarks") === "true";
    const timeoutSeconds = Number(params.get("timeoutSeconds") ?? "0");
    let watcher!: Watcher;
    const body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        // From a version the server has not reached: nothing up to it is sent.
        const after = from !== undefined && from > this.#source.rv() ? from : 0;
        watcher = { kind: info.kind, after, filter, controller, bookmarks, closed: false };
        this.#watchers.add(watcher);
        if (!this.#replay(watcher, from)) return;
        if (bookmarks) {
          watcher.timer = setInterval(() => this.#bookmark(watcher, info), this.#bookmarkMs);
        }
        if (timeoutSeconds > 0) {
          watcher.timeout = setTimeout(() => this.#close(watcher), timeoutSeconds * 1000);
        }
      },
      cancel: () => this.#close(watcher),
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  }

  /**
   * Sends a new watch what came before it: the current state as ADDED (from now), or the
   * events after `from`; false (and the stream ended with 410) when `from` was compacted.
   */
  #replay(w: Watcher, from: number | undefined): boolean {
    if (from !== undefined && from < this.#compactedRv) {
      this.#send(w, {
        type: "ERROR",
        object: {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Failure",
          message: `too old resource version: ${from} (${this.#compactedRv})`,
          reason: "Expired",
          code: 410,
        },
      });
      this.#close(w);
      return false;
    }
    if (from === undefined) {
      // Like the real server: synthetic ADDED events for the current state.
      for (const o of this.#source.objects(w.kind)) {
        if (w.filter(o)) this.#send(w, { type: "ADDED", object: o });
      }
    } else {
      for (const ev of this.#events) {
        if (ev.rv > from && ev.kind === w.kind) this.#deliver(w, ev);
      }
    }
    return true;
  }

  #bookmark(w: Watcher, info: ResourceInfo): void {
    const rv = this.#source.rv();
    if (rv <= w.after) return;
    this.#send(w, {
      type: "BOOKMARK",
      object: {
        kind: info.kind,
        apiVersion: info.apiVersion,
        metadata: { resourceVersion: String(rv) },
      },
    });
  }

  #deliver(w: Watcher, ev: StoredEvent): void {
    if (ev.rv <= w.after) return;
    const now = w.filter(ev.object);
    const before = ev.prev !== undefined && w.filter(ev.prev);
    if (ev.type === "DELETED") {
      if (before || now) this.#send(w, { type: "DELETED", object: ev.object });
    } else if (ev.type === "ADDED") {
      if (now) this.#send(w, { type: "ADDED", object: ev.object });
    } else if (now && before) this.#send(w, { type: "MODIFIED", object: ev.object });
    else if (now) this.#send(w, { type: "ADDED", object: ev.object });
    else if (before) this.#send(w, { type: "DELETED", object: ev.object });
  }

  #send(w: Watcher, ev: { type: string; object: unknown }): void {
    if (w.closed) return;
    try {
      w.controller.enqueue(enc.encode(JSON.stringify(ev) + "\n"));
    } catch {
      this.#close(w);
    }
  }

  #close(w: Watcher | undefined, abort = false): void {
    if (!w || w.closed) {
      if (w) this.#watchers.delete(w);
      return;
    }
    w.closed = true;
    this.#watchers.delete(w);
    if (w.timer !== undefined) clearInterval(w.timer);
    if (w.timeout !== undefined) clearTimeout(w.timeout);
    try {
      if (abort) w.controller.error(new Error("connection reset by fake API server"));
      else w.controller.close();
    } catch {
      // Already closed or cancelled by the client.
    }
  }
}
