/**
 * kube-proxy's Prometheus metrics (names, help, types, labels and buckets as in upstream
 * pkg/proxy/metrics for the nftables mode), on a private registry (net/prometheus.ts).
 * @module
 */
import { Counter, Gauge, Histogram, Registry } from "../net/prometheus.ts";
import { splitHostPort } from "./flags.ts";
import { createRestClientMetrics, type RestClientMetrics } from "./kube/rest_metrics.ts";
import { registerProcessMetrics } from "./process_metrics.ts";
import { zpageResponse } from "./http/zpages.ts";

/** `count` buckets starting at `start`, each `factor` times the previous one. */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  if (start <= 0 || factor <= 1 || count < 1) {
    throw new RangeError(`exponentialBuckets: need start > 0, factor > 1, count >= 1`);
  }
  const out: number[] = [];
  for (let i = 0, v = start; i < count; i++, v *= factor) out.push(v);
  return out;
}

/** `count` buckets starting at `start`, `width` apart. */
export function linearBuckets(start: number, width: number, count: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(start + i * width);
  return out;
}

/** Sync latency buckets: 1 ms .. ~16 s. */
export const SYNC_BUCKETS: readonly number[] = exponentialBuckets(0.001, 2, 15);

/** Network programming latency buckets: 0, 0.25 s, 0.5 s, 1..59 s, 60..115 s, 2..5 min. */
export const NETWORK_PROGRAMMING_BUCKETS: readonly number[] = [
  0,
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** Typed handles to every kube-proxy metric. */
export interface ProxyMetrics {
  /** The registry that holds them (serve it with {@link metricsHandler}). */
  registry: Registry;
  /** kubeproxy_sync_proxy_rules_duration_seconds{ip_family}. */
  syncProxyRulesLatency: Histogram<"ip_family">;
  /** kubeproxy_sync_full_proxy_rules_duration_seconds{ip_family}. */
  syncFullProxyRulesLatency: Histogram<"ip_family">;
  /** kubeproxy_sync_partial_proxy_rules_duration_seconds{ip_family}. */
  syncPartialProxyRulesLatency: Histogram<"ip_family">;
  /** kubeproxy_network_programming_duration_seconds{ip_family}. */
  networkProgrammingLatency: Histogram<"ip_family">;
  /** kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family}. */
  syncProxyRulesLastTimestamp: Gauge<"ip_family">;
  /** kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family}. */
  syncProxyRulesLastQueuedTimestamp: Gauge<"ip_family">;
  /** kubeproxy_sync_proxy_rules_endpoint_changes_pending. */
  endpointChangesPending: Gauge;
  /** kubeproxy_sync_proxy_rules_endpoint_changes_total. */
  endpointChangesTotal: Counter;
  /** kubeproxy_sync_proxy_rules_service_changes_pending. */
  serviceChangesPending: Gauge;
  /** kubeproxy_sync_proxy_rules_service_changes_total. */
  serviceChangesTotal: Counter;
  /** kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family,traffic_policy} (a gauge). */
  noLocalEndpointsTotal: Gauge<"ip_family" | "traffic_policy">;
  /** kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family}. */
  nftablesSyncFailuresTotal: Counter<"ip_family">;
  /** kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family}. */
  nftablesCleanupFailuresTotal: Counter<"ip_family">;
  /** kubeproxy_conntrack_reconciler_sync_duration_seconds{ip_family}. */
  conntrackReconcilerSyncDuration: Histogram<"ip_family">;
  /** kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family}. */
  conntrackReconcilerDeletedEntriesTotal: Counter<"ip_family">;
  /** kubeproxy_proxy_healthz_total{code}. */
  proxyHealthzTotal: Counter<"code">;
  /** kubeproxy_proxy_livez_total{code}. */
  proxyLivezTotal: Counter<"code">;
  /** kubeproxy_nftables_localhost_nodeport_listeners{ip_family} (KEP-6032). */
  localhostNodePortListeners: Gauge<"ip_family">;
  /** kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total{ip_family}. */
  localhostNodePortListenerCreationFailuresTotal: Counter<"ip_family">;
  /** kube_nft_proxy_nftables_repairs_total{ip_family} (ours): checks that rewrote rules. */
  nftablesRepairsTotal: Counter<"ip_family">;
  /** rest_client_requests_total and rest_client_request_duration_seconds (client-go's). */
  restClient: RestClientMetrics;
}

/** Metric constructors bound to one registry; `fam*` take the ip_family label. */
interface Makers {
  registers: Registry[];
  hist: (name: string, help: string, buckets: readonly number[]) => Histogram<"ip_family">;
  famCounter: (name: string, help: string) => Counter<"ip_family">;
  famGauge: (name: string, help: string) => Gauge<"ip_family">;
}

/** Constructors registering in `registry`. */
function makers(registry: Registry): Makers {
  const registers = [registry];
  const fam = ["ip_family"] as const;
  return {
    registers,
    hist: (name, help, buckets) =>
      new Histogram({ name, help, labelNames: fam, buckets: [...buckets], registers }),
    famCounter: (name, help) => new Counter({ name, help, labelNames: fam, registers }),
    famGauge: (name, help) => new Gauge({ name, help, labelNames: fam, registers }),
  };
}

/** The proxier's: sync latencies and timestamps, pending changes, nftables failures. */
function syncMetrics(
  m: Makers,
): Pick<
  ProxyMetrics,
  | "syncProxyRulesLatency"
  | "syncFullProxyRulesLatency"
  | "syncPartialProxyRulesLatency"
  | "networkProgrammingLatency"
  | "syncProxyRulesLastTimestamp"
  | "syncProxyRulesLastQueuedTimestamp"
  | "endpointChangesPending"
  | "endpointChangesTotal"
  | "serviceChangesPending"
  | "serviceChangesTotal"
  | "noLocalEndpointsTotal"
  | "nftablesSyncFailuresTotal"
  | "nftablesCleanupFailuresTotal"
> {
  const { hist, famCounter, famGauge, registers } = m;
  return {
    syncProxyRulesLatency: hist(
      "kubeproxy_sync_proxy_rules_duration_seconds",
      "SyncProxyRules latency in seconds",
      SYNC_BUCKETS,
    ),
    syncFullProxyRulesLatency: hist(
      "kubeproxy_sync_full_proxy_rules_duration_seconds",
      "SyncProxyRules latency in seconds for full resyncs",
      SYNC_BUCKETS,
    ),
    syncPartialProxyRulesLatency: hist(
      "kubeproxy_sync_partial_proxy_rules_duration_seconds",
      "SyncProxyRules latency in seconds for partial resyncs",
      SYNC_BUCKETS,
    ),
    networkProgrammingLatency: hist(
      "kubeproxy_network_programming_duration_seconds",
      "In Cluster Network Programming Latency in seconds",
      NETWORK_PROGRAMMING_BUCKETS,
    ),
    syncProxyRulesLastTimestamp: famGauge(
      "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
      "The last time proxy rules were successfully synced",
    ),
    syncProxyRulesLastQueuedTimestamp: famGauge(
      "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
      "The last time a sync of proxy rules was queued",
    ),
    endpointChangesPending: new Gauge({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
      help: "Pending proxy rules Endpoint changes",
      registers,
    }),
    endpointChangesTotal: new Counter({
      name: "kubeproxy_sync_proxy_rules_endpoint_changes_total",
      help: "Cumulative proxy rules Endpoint changes",
      registers,
    }),
    serviceChangesPending: new Gauge({
      name: "kubeproxy_sync_proxy_rules_service_changes_pending",
      help: "Pending proxy rules Service changes",
      registers,
    }),
    serviceChangesTotal: new Counter({
      name: "kubeproxy_sync_proxy_rules_service_changes_total",
      help: "Cumulative proxy rules Service changes",
      registers,
    }),
    noLocalEndpointsTotal: new Gauge({
      name: "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
      help: "Number of services with a Local traffic policy and no endpoints",
      labelNames: ["ip_family", "traffic_policy"] as const,
      registers,
    }),
    nftablesSyncFailuresTotal: famCounter(
      "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
      "Cumulative proxy nftables sync failures",
    ),
    nftablesCleanupFailuresTotal: famCounter(
      "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
      "Cumulative proxy nftables cleanup failures",
    ),
  };
}

/** The conntrack reconciler's. */
function conntrackMetrics(
  m: Makers,
): Pick<
  ProxyMetrics,
  "conntrackReconcilerSyncDuration" | "conntrackReconcilerDeletedEntriesTotal"
> {
  const { hist, famCounter } = m;
  return {
    conntrackReconcilerSyncDuration: hist(
      "kubeproxy_conntrack_reconciler_sync_duration_seconds",
      "ReconcileConntrackFlowsLatency latency in seconds",
      SYNC_BUCKETS,
    ),
    conntrackReconcilerDeletedEntriesTotal: famCounter(
      "kubeproxy_conntrack_reconciler_deleted_entries_total",
      "Cumulative conntrack flows deleted by conntrack reconciler",
    ),
  };
}

/** The health server's answers. */
function serverMetrics(m: Makers): Pick<ProxyMetrics, "proxyHealthzTotal" | "proxyLivezTotal"> {
  const { registers } = m;
  return {
    proxyHealthzTotal: new Counter({
      name: "kubeproxy_proxy_healthz_total",
      help: "Cumulative proxy healthz HTTP status",
      labelNames: ["code"] as const,
      registers,
    }),
    proxyLivezTotal: new Counter({
      name: "kubeproxy_proxy_livez_total",
      help: "Cumulative proxy livez HTTP status",
      labelNames: ["code"] as const,
      registers,
    }),
  };
}

/** The localhost NodePort proxy's (KEP-6032). */
function localhostMetrics(
  m: Makers,
): Pick<
  ProxyMetrics,
  "localhostNodePortListeners" | "localhostNodePortListenerCreationFailuresTotal"
> {
  const { famCounter, famGauge } = m;
  return {
    localhostNodePortListeners: famGauge(
      "kubeproxy_nftables_localhost_nodeport_listeners",
      "Number of active localhost NodePort listeners",
    ),
    localhostNodePortListenerCreationFailuresTotal: famCounter(
      "kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total",
      "Cumulative localhost NodePort listener creation failures",
    ),
  };
}

/**
 * Creates a fresh registry holding every kube-proxy metric and returns typed handles. The
 * groups register in this order, which is the order /metrics lists them in.
 */
export function createMetrics(): ProxyMetrics {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const m = makers(registry);
  return {
    registry,
    ...syncMetrics(m),
    ...conntrackMetrics(m),
    ...serverMetrics(m),
    ...localhostMetrics(m),
    nftablesRepairsTotal: m.famCounter(
      "kube_nft_proxy_nftables_repairs_total",
      "Checks (after another program's change was notified, or the periodic full check) that found the ruleset changed by another program and restored it",
    ),
    restClient: createRestClientMetrics(registry),
  };
}

/** What the metrics port serves besides /metrics, as upstream's metrics server does. */
export interface MetricsExtras {
  /** The /configz body: sections by name, as component-base's configz registry marshals. */
  configz?: () => Record<string, unknown>;
  /** The /statusz text (served when the ComponentStatusz gate is on). */
  statusz?: () => string;
  /** The /flagz text (served when the ComponentFlagz gate is on). */
  flagz?: () => string;
}

/**
 * Serves `GET /metrics` in the Prometheus text format, plus upstream's other metrics-port paths:
 * `/proxyMode` (the proxy mode as plain text), `/healthz` and `/healthz/ping` ("ok": the process
 * answers; upstream installs k8s.io/apiserver's healthz handler with only its ping check, so this
 * is not the proxy health of the healthz port), `/configz`
 * (`{"kubeproxy.config.k8s.io": <configuration>, ...}`) and the zpages `/statusz` and `/flagz`
 * (./zpages.ts). 404 for other paths, 405 for other methods.
 */
export async function metricsHandler(
  req: Request,
  registry: Registry,
  extras: MetricsExtras = {},
): Promise<Response> {
  const url = new URL(req.url);
  const known = ["/metrics", "/proxyMode", "/healthz", "/healthz/ping"];
  if (extras.configz) known.push("/configz");
  if (extras.statusz) known.push("/statusz");
  if (extras.flagz) known.push("/flagz");
  if (!known.includes(url.pathname)) return new Response("not found\n", { status: 404 });
  if (req.method !== "GET" && req.method !== "HEAD") {
    return new Response("method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } });
  }
  const reply = (body: string, type: string) =>
    new Response(req.method === "HEAD" ? null : body, { headers: { "content-type": type } });
  switch (url.pathname) {
    case "/proxyMode":
      return reply("nftables", "text/plain; charset=utf-8");
    case "/healthz":
      // ?verbose lists the checks, as the apiserver handler does.
      if (url.searchParams.has("verbose")) {
        return reply("[+]ping ok\nhealthz check passed\n", "text/plain; charset=utf-8");
      }
      return reply("ok", "text/plain; charset=utf-8");
    case "/healthz/ping":
      return reply("ok", "text/plain; charset=utf-8");
    case "/configz":
      return reply(
        JSON.stringify(extras.configz!()),
        "application/json",
      );
    case "/statusz":
      return zpageResponse(req, extras.statusz!);
    case "/flagz":
      return zpageResponse(req, extras.flagz!);
  }
  return reply(await registry.metrics(), registry.contentType);
}

/** Serves {@link metricsHandler} on "host:port" (port 0 picks a free one); stop with shutdown(). */
export function serveMetrics(
  addr: string,
  registry: Registry,
  extras: MetricsExtras = {},
): Deno.HttpServer<Deno.NetAddr> {
  const { hostname, port } = splitHostPort(addr);
  return Deno.serve(
    { hostname, port, onListen: () => {} },
    (req) => metricsHandler(req, registry, extras),
  );
}
