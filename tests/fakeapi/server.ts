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
import {
  type KObject,
  kubeconfigFor,
  type ResourceInfo,
  RESOURCES,
  status,
  tooLarge,
} from "./resources.ts";
import { WatchHub } from "./watch_hub.ts";

export { parseFieldSelector, parseLabelSelector };
export type { KObject };

const clone = <T>(o: T): T => structuredClone(o);

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

/** A fake API server; create with {@link FakeApiServer.start}. */
export class FakeApiServer {
  /** Every request path+query received, in order (for assertions). */
  readonly requests: string[] = [];
  #rv = 0;
  readonly #objects = new Map<string, Map<string, KObject>>();
  readonly #watches: WatchHub;
  #server?: Deno.HttpServer<Deno.NetAddr>;
  #port: number;
  #failures: Array<{ status: number; match?: (path: string) => boolean }> = [];
  #delays: Array<{ ms: number; match: (path: string) => boolean }> = [];
  readonly #serviceCIDRs: boolean;
  /** Snapshots of paged lists, by continue token id. */
  readonly #pages = new Map<string, { items: KObject[]; rv: number }>();
  #pageId = 0;

  private constructor(opts: FakeApiOptions) {
    this.#port = opts.port ?? 0;
    this.#serviceCIDRs = opts.serviceCIDRs ?? true;
    this.#watches = new WatchHub({
      rv: () => this.#rv,
      objects: (kind) => this.#objects.get(kind)!.values(),
    }, opts.bookmarkIntervalMs ?? 1000);
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
    return this.#watches.size;
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
    this.#watches.dropAll(opts.abort);
  }

  /**
   * Writes `line` (plus a newline) as it is to every open watch of `kind`: a truncated JSON line,
   * an unknown event type, a wrong-typed object, as a misbehaving server or proxy would.
   */
  sendRaw(kind: string, line: string): void {
    this.#watches.sendRaw(kind, line);
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
    this.#watches.compact(this.#rv);
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
    this.#watches.compact(snap.rv);
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
    this.#watches.emit({
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
    this.#watches.emit({ rv: this.#rv, kind, type: "DELETED", object: o, prev });
    return true;
  }

  /** Current objects of a kind (copies). */
  list(kind: string): KObject[] {
    return [...(this.#objects.get(kind)?.values() ?? [])].map(clone);
  }

  /** A kubeconfig (YAML) pointing at this server over plain HTTP. */
  kubeconfigYaml(): string {
    return kubeconfigFor(this.url);
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
    if (watch === "true" || watch === "1") {
      return this.#watches.open(r.info, filter, url.searchParams);
    }
    const limit = Number(url.searchParams.get("limit") ?? "0");
    const token = url.searchParams.get("continue");
    const asked = Number(url.searchParams.get("resourceVersion") ?? "");
    if (!token && asked > this.#rv) return tooLarge(asked, this.#rv);
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
}
