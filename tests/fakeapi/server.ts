/**
 * In-process fake Kubernetes API server for tests: plain HTTP on 127.0.0.1 with real list and
 * watch semantics for core/v1 services and nodes, discovery.k8s.io/v1 endpointslices and
 * networking.k8s.io/v1 servicecidrs.
 *
 * - one global resourceVersion counter; lists carry `metadata.resourceVersion`;
 * - a watch from resourceVersion N replays the events after N, then streams live ones;
 *   N older than the compaction point (see {@link FakeApiServer.compact}) gets an ERROR event
 *   carrying a 410 Status, then the stream ends;
 * - BOOKMARK events when the client asks for `allowWatchBookmarks`;
 * - labelSelector (=, ==, !=, exists, !exists, in, notin) and fieldSelector (metadata.name,
 *   metadata.namespace; = and !=); with selectors, objects entering / leaving the selection are
 *   sent as ADDED / DELETED, as the real server does;
 * - paged lists (`limit` / `continue`) over a snapshot taken at the first page; an expired
 *   token ({@link FakeApiServer.expireContinueTokens}) gets 410 Gone, reason Expired;
 * - fault injection: {@link FakeApiServer.failNext}, {@link FakeApiServer.dropWatches},
 *   {@link FakeApiServer.down} / {@link FakeApiServer.up};
 * - a restore from a backup ({@link FakeApiServer.snapshot} / {@link FakeApiServer.restore}):
 *   the resourceVersion goes back. As the real server's watch cache does with a version it has
 *   not reached, a list asking for one gets 504 "Too large resource version", and a watch from
 *   one gets no event or bookmark until the server passes it.
 * @module
 */
import { type Filter, parseFieldSelector, parseLabelSelector } from "./selectors.ts";

export { parseFieldSelector, parseLabelSelector };

/** A Kubernetes object as JSON. */
export interface KObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
    resourceVersion?: string;
    uid?: string;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

interface ResourceInfo {
  plural: string;
  kind: string;
  apiVersion: string;
  namespaced: boolean;
  prefix: string;
}

/** The resources this server knows, by kind. */
export const RESOURCES: Record<string, ResourceInfo> = {
  Service: {
    plural: "services",
    kind: "Service",
    apiVersion: "v1",
    namespaced: true,
    prefix: "/api/v1",
  },
  Node: { plural: "nodes", kind: "Node", apiVersion: "v1", namespaced: false, prefix: "/api/v1" },
  EndpointSlice: {
    plural: "endpointslices",
    kind: "EndpointSlice",
    apiVersion: "discovery.k8s.io/v1",
    namespaced: true,
    prefix: "/apis/discovery.k8s.io/v1",
  },
  ServiceCIDR: {
    plural: "servicecidrs",
    kind: "ServiceCIDR",
    apiVersion: "networking.k8s.io/v1",
    namespaced: false,
    prefix: "/apis/networking.k8s.io/v1",
  },
};

type EventType = "ADDED" | "MODIFIED" | "DELETED";

interface StoredEvent {
  rv: number;
  kind: string;
  type: EventType;
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

/** The server's objects at one resourceVersion, from {@link FakeApiServer.snapshot}. */
export interface ApiSnapshot {
  readonly rv: number;
  readonly objects: ReadonlyMap<string, ReadonlyMap<string, KObject>>;
}

/** Options for {@link FakeApiServer.start}. */
export interface FakeApiOptions {
  /** Port to listen on; default 0 (a free port). */
  port?: number;
  /** Serve networking.k8s.io/v1 servicecidrs; false answers 404 like an old API server. */
  serviceCIDRs?: boolean;
  /** Interval of BOOKMARK events on watches that allow them; default 1000 ms. */
  bookmarkIntervalMs?: number;
}

const enc = new TextEncoder();

function clone<T>(o: T): T {
  return structuredClone(o);
}

function status(code: number, reason: string, message: string): Response {
  return new Response(
    JSON.stringify({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message,
      reason,
      code,
    }),
    { status: code, headers: { "content-type": "application/json" } },
  );
}

/** A fake API server; create with {@link FakeApiServer.start}. */
export class FakeApiServer {
  /** Every request path+query received, in order (for assertions). */
  readonly requests: string[] = [];
  #rv = 0;
  #compactedRv = 0;
  #events: StoredEvent[] = [];
  readonly #objects = new Map<string, Map<string, KObject>>();
  readonly #watchers = new Set<Watcher>();
  #server?: Deno.HttpServer<Deno.NetAddr>;
  #port: number;
  #failures: Array<{ status: number; match?: (path: string) => boolean }> = [];
  #delays: Array<{ ms: number; match: (path: string) => boolean }> = [];
  readonly #serviceCIDRs: boolean;
  readonly #bookmarkMs: number;
  /** Snapshots of paged lists, by continue token id. */
  readonly #pages = new Map<string, { items: KObject[]; rv: number }>();
  #pageId = 0;

  private constructor(opts: FakeApiOptions) {
    this.#port = opts.port ?? 0;
    this.#serviceCIDRs = opts.serviceCIDRs ?? true;
    this.#bookmarkMs = opts.bookmarkIntervalMs ?? 1000;
    for (const k of Object.keys(RESOURCES)) this.#objects.set(k, new Map());
  }

  /** Starts a server on 127.0.0.1. */
  static start(opts: FakeApiOptions = {}): FakeApiServer {
    const s = new FakeApiServer(opts);
    s.up();
    return s;
  }

  /** Base URL, e.g. "http://127.0.0.1:41234". */
  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  /** The port (stable across down()/up()). */
  get port(): number {
    return this.#port;
  }

  /** Current global resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /** Number of open watch streams. */
  get openWatches(): number {
    return this.#watchers.size;
  }

  /** Starts listening (again) on the same port. */
  up(): void {
    if (this.#server) return;
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: this.#port, onListen: () => {} },
      (req) => {
        const url = new URL(req.url);
        const di = this.#delays.findIndex((d) => d.match(url.pathname + url.search));
        if (di < 0) return this.#handle(req);
        const { ms } = this.#delays.splice(di, 1)[0];
        return new Promise<Response>((res) => setTimeout(() => res(this.#handle(req)), ms));
      },
    );
    this.#port = this.#server.addr.port;
  }

  /** Stops listening and drops every watch, as a crashed API server would. */
  async down(): Promise<void> {
    const s = this.#server;
    this.#server = undefined;
    this.dropWatches({ abort: true });
    if (s) {
      // Long-lived watch responses are already closed; shutdown then returns promptly.
      await s.shutdown();
    }
  }

  /** Stops the server for good (watch streams end cleanly). */
  async close(): Promise<void> {
    const s = this.#server;
    this.#server = undefined;
    this.dropWatches();
    if (s) await s.shutdown();
  }

  /**
   * Ends every open watch stream from the server side: a clean end of the chunked body, or with
   * `abort` an errored stream (the connection is cut mid-response).
   */
  dropWatches(opts: { abort?: boolean } = {}): void {
    for (const w of [...this.#watchers]) this.#closeWatcher(w, opts.abort);
  }

  /**
   * Writes `line` (plus a newline) as it is to every open watch of `kind`: a truncated JSON line,
   * an unknown event type, a wrong-typed object, as a misbehaving server or proxy would.
   */
  sendRaw(kind: string, line: string): void {
    for (const w of this.#watchers) {
      if (w.kind !== kind || w.closed) continue;
      try {
        w.controller.enqueue(enc.encode(line + "\n"));
      } catch {
        this.#closeWatcher(w);
      }
    }
  }

  /** The next request whose path matches is answered only after `ms` (a slow list, say). */
  delayNext(ms: number, match: (path: string) => boolean): void {
    this.#delays.push({ ms, match });
  }

  /** The next `n` list/watch requests (optionally only paths matching) fail with `status`. */
  failNext(n: number, statusCode = 500, match?: (path: string) => boolean): void {
    for (let i = 0; i < n; i++) this.#failures.push({ status: statusCode, match });
  }

  /** Invalidates every continue token handed out: their next page gets 410 Gone (Expired). */
  expireContinueTokens(): void {
    this.#pages.clear();
  }

  /** Forgets the event history: watches from an older resourceVersion now get 410 Gone. */
  compact(): void {
    this.#compactedRv = this.#rv;
    this.#events = [];
  }

  /** A copy of every object and the resourceVersion (a backup, for {@link restore}). */
  snapshot(): ApiSnapshot {
    const objects = new Map<string, Map<string, KObject>>();
    for (const [kind, m] of this.#objects) objects.set(kind, new Map(clone([...m])));
    return { rv: this.#rv, objects };
  }

  /**
   * Puts the objects and the resourceVersion back as they were in `snap`, as an API server whose
   * etcd was restored from a backup: the version goes back, the event history is gone (a watch
   * from before `snap` gets 410), and the open watches end (the server restarted).
   */
  restore(snap: ApiSnapshot): void {
    for (const [kind, m] of snap.objects) this.#objects.set(kind, new Map(clone([...m])));
    this.#rv = snap.rv;
    this.#compactedRv = snap.rv;
    this.#events = [];
    this.#pages.clear();
    this.dropWatches();
  }

  /** Creates or replaces an object (kind and metadata.name required); returns the stored copy. */
  apply(obj: KObject): KObject {
    const info = obj.kind ? RESOURCES[obj.kind] : undefined;
    if (!info) throw new Error(`fake API: unsupported kind ${JSON.stringify(obj.kind)}`);
    const name = obj.metadata?.name;
    if (!name) throw new Error("fake API: metadata.name is required");
    const ns = info.namespaced ? obj.metadata?.namespace ?? "default" : undefined;
    const store = this.#objects.get(info.kind)!;
    const key = `${ns ?? ""}/${name}`;
    const prev = store.get(key);
    const o = clone(obj);
    o.apiVersion = info.apiVersion;
    o.metadata = {
      ...o.metadata,
      name,
      ...(ns !== undefined ? { namespace: ns } : {}),
      uid: prev?.metadata?.uid ?? o.metadata?.uid ?? crypto.randomUUID(),
      creationTimestamp: prev?.metadata?.creationTimestamp ?? new Date().toISOString()
        .replace(/\.\d+Z$/, "Z"),
      resourceVersion: String(++this.#rv),
    };
    if (info.namespaced === false) delete o.metadata.namespace;
    store.set(key, o);
    this.#emit({
      rv: this.#rv,
      kind: info.kind,
      type: prev ? "MODIFIED" : "ADDED",
      object: o,
      prev,
    });
    return clone(o);
  }

  /** The stored object, or undefined. */
  get(kind: string, namespace: string | undefined, name: string): KObject | undefined {
    const info = RESOURCES[kind];
    if (!info) throw new Error(`fake API: unsupported kind ${JSON.stringify(kind)}`);
    const key = `${info.namespaced ? namespace ?? "default" : ""}/${name}`;
    const o = this.#objects.get(kind)!.get(key);
    return o ? clone(o) : undefined;
  }

  /** Deletes an object; returns false when it did not exist. */
  remove(kind: string, namespace: string | undefined, name: string): boolean {
    const info = RESOURCES[kind];
    if (!info) throw new Error(`fake API: unsupported kind ${JSON.stringify(kind)}`);
    const store = this.#objects.get(kind)!;
    const key = `${info.namespaced ? namespace ?? "default" : ""}/${name}`;
    const prev = store.get(key);
    if (!prev) return false;
    store.delete(key);
    const o = clone(prev);
    o.metadata!.resourceVersion = String(++this.#rv);
    this.#emit({ rv: this.#rv, kind, type: "DELETED", object: o, prev });
    return true;
  }

  /** Current objects of a kind (copies). */
  list(kind: string): KObject[] {
    return [...(this.#objects.get(kind)?.values() ?? [])].map(clone);
  }

  /** A kubeconfig (YAML) pointing at this server over plain HTTP. */
  kubeconfigYaml(): string {
    // client-node 2.x refuses plain http unless the cluster skips TLS verification.
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: fake",
      "  cluster:",
      `    server: ${this.url}`,
      "    insecure-skip-tls-verify: true",
      "users:",
      "- name: fake",
      "  user:",
      "    token: fake-token",
      "contexts:",
      "- name: fake",
      "  context:",
      "    cluster: fake",
      "    user: fake",
      "current-context: fake",
      "",
    ].join("\n");
  }

  /** Writes {@link kubeconfigYaml} to `path` (default: a new temp file); returns the path. */
  writeKubeconfig(path?: string): string {
    const p = path ?? Deno.makeTempFileSync({ prefix: "fakeapi-", suffix: ".kubeconfig" });
    Deno.writeTextFileSync(p, this.kubeconfigYaml());
    return p;
  }

  // -------------------------------------------------------------------------------------------

  #route(path: string): { info: ResourceInfo; namespace?: string; name?: string } | undefined {
    for (const info of Object.values(RESOURCES)) {
      if (!path.startsWith(info.prefix + "/")) continue;
      const rest = path.slice(info.prefix.length + 1).split("/");
      if (rest[0] === info.plural && rest.length <= 2) return { info, name: rest[1] };
      if (
        info.namespaced && rest[0] === "namespaces" && rest[2] === info.plural && rest.length <= 4
      ) {
        return { info, namespace: rest[1], name: rest[3] };
      }
    }
    return undefined;
  }

  /** Events posted (events.k8s.io/v1), oldest first. */
  readonly events: KObject[] = [];

  #postEvent(req: Request, namespace: string): Promise<Response> {
    return req.json().then(
      (o: KObject) => {
        if (o?.kind !== "Event" || !o.metadata?.name) {
          return status(422, "Invalid", "an Event needs kind Event and metadata.name");
        }
        const stored = {
          ...o,
          metadata: { ...o.metadata, namespace, resourceVersion: String(++this.#rv) },
        };
        this.events.push(stored);
        return Response.json(stored, { status: 201 });
      },
      () => status(400, "BadRequest", "the body is not JSON"),
    );
  }

  #handle(req: Request): Response | Promise<Response> {
    const url = new URL(req.url);
    this.requests.push(url.pathname + url.search);
    const fi = this.#failures.findIndex((f) => !f.match || f.match(url.pathname + url.search));
    if (fi >= 0) {
      const f = this.#failures.splice(fi, 1)[0];
      return status(f.status, "InternalError", `injected failure ${f.status}`);
    }
    const ev = url.pathname.match(/^\/apis\/events\.k8s\.io\/v1\/namespaces\/([^/]+)\/events$/);
    if (req.method === "POST" && ev) return this.#postEvent(req, ev[1]);
    if (req.method !== "GET") return status(405, "MethodNotAllowed", "only GET is served");
    if (url.pathname === "/version") {
      return Response.json({
        major: "1",
        minor: "34",
        gitVersion: "v1.34.0-fake",
        platform: "linux/amd64",
      });
    }
    const r = this.#route(url.pathname);
    if (!r || (r.info.kind === "ServiceCIDR" && !this.#serviceCIDRs)) {
      return status(404, "NotFound", "the server could not find the requested resource");
    }
    let filter: Filter;
    try {
      const ls = parseLabelSelector(url.searchParams.get("labelSelector") ?? "");
      const fs = parseFieldSelector(url.searchParams.get("fieldSelector") ?? "");
      const ns = r.namespace;
      filter = (o) => ls(o) && fs(o) && (ns === undefined || o.metadata?.namespace === ns);
    } catch (e) {
      return status(400, "BadRequest", (e as Error).message);
    }
    if (r.name !== undefined) {
      const key = `${r.namespace ?? ""}/${r.name}`;
      const o = this.#objects.get(r.info.kind)!.get(key);
      if (!o) return status(404, "NotFound", `${r.info.plural} "${r.name}" not found`);
      return Response.json(o);
    }
    const watch = url.searchParams.get("watch");
    if (watch === "true" || watch === "1") return this.#watch(r.info, filter, url.searchParams);
    const limit = Number(url.searchParams.get("limit") ?? "0");
    const token = url.searchParams.get("continue");
    const asked = Number(url.searchParams.get("resourceVersion") ?? "");
    if (!token && asked > this.#rv) return this.#tooLarge(asked);
    let snap: { items: KObject[]; rv: number };
    let offset = 0;
    if (token) {
      const [id, off] = token.split(":");
      const found = this.#pages.get(id);
      if (!found) {
        return status(410, "Expired", "The provided continue parameter is too old");
      }
      snap = found;
      offset = Number(off);
    } else {
      const items = [...this.#objects.get(r.info.kind)!.values()].filter(filter).map((o) => {
        const { kind: _k, apiVersion: _a, ...rest } = o;
        return rest;
      });
      snap = { items, rv: this.#rv };
    }
    const end = limit > 0 ? Math.min(snap.items.length, offset + limit) : snap.items.length;
    let next: string | undefined;
    if (end < snap.items.length) {
      const id = token ? token.split(":")[0] : String(++this.#pageId);
      this.#pages.set(id, snap);
      next = `${id}:${end}`;
    }
    return Response.json({
      kind: `${r.info.kind}List`,
      apiVersion: r.info.apiVersion,
      metadata: { resourceVersion: String(snap.rv), ...(next ? { continue: next } : {}) },
      items: snap.items.slice(offset, end),
    });
  }

  /** What the real server answers a request for a version it has not reached (after ~3 s). */
  #tooLarge(asked: number): Response {
    return Response.json({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `Too large resource version: ${asked}, current: ${this.#rv}`,
      reason: "Timeout",
      details: {
        causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
        retryAfterSeconds: 1,
      },
      code: 504,
    }, { status: 504 });
  }

  #watch(info: ResourceInfo, filter: Filter, params: URLSearchParams): Response {
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
        const after = from !== undefined && from > this.#rv ? from : 0;
        watcher = { kind: info.kind, after, filter, controller, bookmarks, closed: false };
        this.#watchers.add(watcher);
        if (from !== undefined && from < this.#compactedRv) {
          this.#send(watcher, {
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
          this.#closeWatcher(watcher);
          return;
        }
        if (from === undefined) {
          // Like the real server: synthetic ADDED events for the current state.
          for (const o of this.#objects.get(info.kind)!.values()) {
            if (filter(o)) this.#send(watcher, { type: "ADDED", object: o });
          }
        } else {
          for (const ev of this.#events) {
            if (ev.rv > from && ev.kind === info.kind) this.#deliver(watcher, ev);
          }
        }
        if (bookmarks) {
          watcher.timer = setInterval(() => {
            if (this.#rv <= watcher.after) return;
            this.#send(watcher, {
              type: "BOOKMARK",
              object: {
                kind: info.kind,
                apiVersion: info.apiVersion,
                metadata: { resourceVersion: String(this.#rv) },
              },
            });
          }, this.#bookmarkMs);
        }
        if (timeoutSeconds > 0) {
          watcher.timeout = setTimeout(() => this.#closeWatcher(watcher), timeoutSeconds * 1000);
        }
      },
      cancel: () => this.#closeWatcher(watcher),
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  }

  #emit(ev: StoredEvent): void {
    this.#events.push(ev);
    for (const w of this.#watchers) if (w.kind === ev.kind) this.#deliver(w, ev);
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
      this.#closeWatcher(w);
    }
  }

  #closeWatcher(w: Watcher | undefined, abort = false): void {
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
