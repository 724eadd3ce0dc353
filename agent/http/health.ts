/**
 * Proxy health (/healthz, /livez) and per-service HealthCheckNodePort servers, with
 * kube-proxy's semantics:
 * - a proxier family is unhealthy when an update was queued more than `healthTimeout` ago and
 *   no sync has committed since (upstream passes healthTimeout = 2 x syncPeriod);
 * - /healthz is also 503 when the node is being deleted or carries the
 *   `ToBeDeletedByClusterAutoscaler` taint (or is not known yet); /livez skips that check;
 * - HealthCheckNodePort servers answer 200 while the service has local endpoints and the proxy is
 *   healthy, else 503.
 *
 * Our addition, watch health: the informer supervisor reports each watch's state through
 * {@link ProxierHealthServer.setWatchHealthy}. A watch that has been down for longer than the
 * health timeout makes /healthz (not /livez) return 503 and lists the resource in `watchesDown`.
 * Rationale: upstream has no such signal; a short API outage is normal (rules keep working), but
 * a node that has not seen changes for 2 sync periods is serving stale rules and should stop
 * attracting load-balancer traffic. /livez stays 200 because restarting the agent does not fix
 * an unreachable API server.
 * @module
 */
import type { Logger } from "../log.ts";
import { familyLabel, type IpFamily, type IpFamilyLabel, toIpFamily } from "../../net/family.ts";
import type { ProxyMetrics } from "../metrics.ts";
import { splitHostPort } from "../flags.ts";

/** Taint the cluster autoscaler puts on nodes it is about to delete. */
const TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler";

/** Go's zero time, which upstream reports before the first sync. */
const ZERO_TIME = "0001-01-01T00:00:00Z";

/** The subset of a core/v1 Node the health check reads. */
export interface HealthNode {
  /** Set while the Node is being deleted. */
  metadata?: { deletionTimestamp?: string | Date | null } | null;
  /** Its taints (ToBeDeletedByClusterAutoscaler makes it ineligible). */
  spec?: { taints?: Array<{ key?: string | null } | null> | null } | null;
}

/** Health of one IP family's proxier. */
export interface ProxierHealth {
  /** Last committed sync (ISO time). */
  lastUpdated: string;
  /** False when a queued update is older than the timeout. */
  healthy: boolean;
}

/** JSON body of /healthz and /livez (upstream shape, plus `watchesDown` when non-empty). */
export interface ProxyHealth {
  /** The oldest family's last committed sync (ISO time). */
  lastUpdated: string;
  /** When this answer was made (ISO time). */
  currentTime: string;
  /** Only on /healthz. */
  nodeEligible?: boolean;
  /** False when a family's queued update is older than the timeout. */
  healthy: boolean;
  /** Each family's health. */
  status?: Partial<Record<IpFamilyLabel, ProxierHealth>>;
  /** Our extension: resources whose watch has been down longer than the health timeout. */
  watchesDown?: string[];
}

/** Options for {@link ProxierHealthServer}. */
export interface ProxierHealthOptions {
  /** Queued-update age after which the proxy is unhealthy (upstream: 2 x syncPeriod). */
  healthTimeoutMs: number;
  /** Counts responses in kubeproxy_proxy_healthz_total / livez_total. */
  metrics?: Pick<ProxyMetrics, "proxyHealthzTotal" | "proxyLivezTotal">;
  /** Clock in ms, for tests. */
  now?: () => number;
  /** Logger for server start/stop. */
  log?: Logger;
}

/** True unless the node is being deleted or is tainted for deletion; false when unknown. */
export function nodeEligible(node: HealthNode | undefined | null): boolean {
  if (!node) return false;
  if (node.metadata?.deletionTimestamp) return false;
  for (const t of node.spec?.taints ?? []) if (t?.key === TO_BE_DELETED_TAINT) return false;
  return true;
}

/** kube-proxy's proxier health tracker and /healthz + /livez HTTP server. */
export class ProxierHealthServer {
  readonly #timeout: number;
  readonly #metrics?: ProxierHealthOptions["metrics"];
  readonly #now: () => number;
  readonly #log?: Logger;
  readonly #lastUpdated = new Map<IpFamilyLabel, number>();
  readonly #oldestQueued = new Map<IpFamilyLabel, number>();
  readonly #watchDownSince = new Map<string, number>();
  #node: HealthNode | undefined;
  #servers: Deno.HttpServer<Deno.NetAddr>[] = [];

  /** Creates the tracker; call {@link serve} to expose it over HTTP. */
  constructor(opts: ProxierHealthOptions) {
    if (!(opts.healthTimeoutMs > 0)) {
      throw new RangeError(`healthTimeoutMs must be > 0, got ${opts.healthTimeoutMs}`);
    }
    this.#timeout = opts.healthTimeoutMs;
    this.#metrics = opts.metrics;
    this.#now = opts.now ?? Date.now;
    this.#log = opts.log;
  }

  /** A change needing a sync was received for `family` (keeps the oldest pending time). */
  queued(family: IpFamily | IpFamilyLabel = 4): void {
    const f = familyLabel(toIpFamily(family));
    if (!this.#oldestQueued.has(f)) this.#oldestQueued.set(f, this.#now());
  }

  /** A sync for `family` committed: it is current and healthy. */
  updated(family: IpFamily | IpFamilyLabel = 4): void {
    const f = familyLabel(toIpFamily(family));
    this.#oldestQueued.delete(f);
    this.#lastUpdated.set(f, this.#now());
  }

  /** Sets this node's object (from the Node informer); undefined when unknown or deleted. */
  setNode(node: HealthNode | undefined): void {
    this.#node = node;
  }

  /** Records whether the watch of `resource` is working (from the watch supervisor). */
  setWatchHealthy(resource: string, ok: boolean): void {
    if (ok) this.#watchDownSince.delete(resource);
    else if (!this.#watchDownSince.has(resource)) this.#watchDownSince.set(resource, this.#now());
  }

  /** Resources whose watch has been down for longer than the health timeout. */
  watchesDown(): string[] {
    const now = this.#now();
    return [...this.#watchDownSince].filter(([, since]) => now - since >= this.#timeout)
      .map(([r]) => r).sort();
  }

  /** Proxier health without the node check (what /livez reports). */
  health(): ProxyHealth {
    const now = this.#now();
    let last = 0;
    let healthy = true;
    const status: Partial<Record<IpFamilyLabel, ProxierHealth>> = {};
    for (const [f, t] of this.#lastUpdated) {
      if (t > last) last = t;
      const queued = this.#oldestQueued.get(f);
      // Before the first sync a family is healthy, as upstream ("starting up").
      const ok = queued === undefined || now - queued < this.#timeout;
      if (!ok) healthy = false;
      status[f] = { lastUpdated: new Date(t).toISOString(), healthy: ok };
    }
    const h: ProxyHealth = {
      lastUpdated: last ? new Date(last).toISOString() : ZERO_TIME,
      currentTime: new Date(now).toISOString(),
      healthy,
    };
    if (Object.keys(status).length) h.status = status;
    return h;
  }

  /** True when this node may receive load-balancer traffic. */
  nodeEligible(): boolean {
    return nodeEligible(this.#node);
  }

  /** Handles /healthz and /livez; 404 otherwise. */
  handle(req: Request): Response {
    const path = new URL(req.url).pathname;
    if (path !== "/healthz" && path !== "/livez") {
      return new Response("404 page not found\n", { status: 404 });
    }
    const h = this.health();
    let ok = h.healthy;
    if (path === "/healthz") {
      const eligible = this.nodeEligible();
      h.nodeEligible = eligible;
      const down = this.watchesDown();
      if (down.length) h.watchesDown = down;
      ok = ok && eligible && down.length === 0;
    }
    const code = ok ? 200 : 503;
    // Upstream reports "now" as lastUpdated while healthy, for compatibility with old clients.
    if (ok) h.lastUpdated = h.currentTime;
    const counter = path === "/healthz"
      ? this.#metrics?.proxyHealthzTotal
      : this.#metrics?.proxyLivezTotal;
    counter?.inc({ code: String(code) });
    // Keep upstream's key order: lastUpdated, currentTime, nodeEligible, healthy, status.
    const body = {
      lastUpdated: h.lastUpdated,
      currentTime: h.currentTime,
      nodeEligible: h.nodeEligible,
      healthy: h.healthy,
      status: h.status,
      watchesDown: h.watchesDown,
    };
    return new Response(JSON.stringify(body), {
      status: code,
      headers: { "content-type": "application/json", "x-content-type-options": "nosniff" },
    });
  }

  /**
   * Starts serving on "host:port" (port 0 picks a free one); returns the bound address. May be
   * called once per address (v1alpha2 lists several).
   */
  serve(addr: string): Deno.NetAddr {
    const { hostname, port } = splitHostPort(addr);
    const server = Deno.serve(
      { hostname, port, onListen: () => {} },
      (req) => this.handle(req),
    );
    this.#servers.push(server);
    this.#log?.info("Started healthz HTTP server", { address: addr }, 3);
    return server.addr;
  }

  /** Stops the HTTP servers, if running. */
  async close(): Promise<void> {
    const servers = this.#servers;
    this.#servers = [];
    await Promise.all(servers.map((s) => s.shutdown()));
  }
}

/** One HealthCheckNodePort to serve. */
export interface ServiceHealthEntry {
  /** "namespace/name". */
  service: string;
  /** Ready local endpoints of the service on this node. */
  localEndpoints: number;
}

/** Options for {@link ServiceHealthServers}. */
export interface ServiceHealthOptions {
  /** Host addresses to listen on for every port (upstream: node IPs from --nodeport-addresses). */
  addresses?: string[];
  /** The proxy's own health (served as serviceProxyHealthy); default always healthy. */
  proxyHealthy?: () => boolean;
  /** Where bind failures and open/close events are logged. */
  log?: Logger;
}

interface Instance {
  service: string;
  servers: Deno.HttpServer<Deno.NetAddr>[];
}

function splitService(s: string): { namespace: string; name: string } {
  const i = s.indexOf("/");
  return i < 0 ? { namespace: "", name: s } : { namespace: s.slice(0, i), name: s.slice(i + 1) };
}

/**
 * Per-service HealthCheckNodePort servers (services with externalTrafficPolicy=Local).
 * `sync()` opens and closes listeners to match the given map; a port that fails to bind is
 * logged and tried again on the next sync.
 */
export class ServiceHealthServers {
  readonly #addresses: string[];
  readonly #proxyHealthy: () => boolean;
  readonly #log?: Logger;
  readonly #instances = new Map<number, Instance>();
  readonly #counts = new Map<number, number>();

  /** Creates the manager; nothing listens until {@link sync}. */
  constructor(opts: ServiceHealthOptions = {}) {
    this.#addresses = opts.addresses?.length ? opts.addresses : ["0.0.0.0"];
    this.#proxyHealthy = opts.proxyHealthy ?? (() => true);
    this.#log = opts.log;
  }

  /** Ports with a running listener. */
  ports(): number[] {
    return [...this.#instances.keys()].sort((a, b) => a - b);
  }

  /** Makes the listeners match `want` (healthCheckNodePort -> service and local endpoints). */
  async sync(want: Map<number, ServiceHealthEntry>): Promise<void> {
    for (const [port, inst] of this.#instances) {
      const w = want.get(port);
      if (!w || w.service !== inst.service) {
        this.#log?.info("Closing healthcheck", { service: inst.service, port }, 2);
        this.#instances.delete(port);
        this.#counts.delete(port);
        await Promise.all(inst.servers.map((s) => s.shutdown()));
      }
    }
    for (const [port, w] of want) {
      this.#counts.set(port, w.localEndpoints);
      if (this.#instances.has(port)) continue;
      const servers: Deno.HttpServer<Deno.NetAddr>[] = [];
      try {
        for (const hostname of this.#addresses) {
          servers.push(Deno.serve(
            { hostname, port, onListen: () => {} },
            (req) => this.#handle(req, port, w.service),
          ));
        }
      } catch (err) {
        // Close what did open so the next sync can retry cleanly.
        await Promise.all(servers.map((s) => s.shutdown()));
        this.#counts.delete(port);
        this.#log?.error("Failed to start healthcheck", err, { service: w.service, port });
        continue;
      }
      this.#log?.info("Opening healthcheck", { service: w.service, port }, 2);
      this.#instances.set(port, { service: w.service, servers });
    }
  }

  #handle(_req: Request, port: number, service: string): Response {
    const count = this.#counts.get(port) ?? 0;
    const healthy = this.#proxyHealthy();
    const body = JSON.stringify({
      service: splitService(service),
      localEndpoints: count,
      serviceProxyHealthy: healthy,
    });
    return new Response(body, {
      status: count > 0 && healthy ? 200 : 503,
      headers: {
        "content-type": "application/json",
        "x-content-type-options": "nosniff",
        "x-load-balancing-endpoint-weight": String(count),
      },
    });
  }

  /** Closes every listener. */
  async close(): Promise<void> {
    await this.sync(new Map());
  }
}
