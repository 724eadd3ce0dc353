import assert from "node:assert/strict";
import {
  createMetrics,
  exponentialBuckets,
  metricsHandler,
  NETWORK_PROGRAMMING_BUCKETS,
  serveMetrics,
  SYNC_BUCKETS,
} from "./metrics.ts";

const EXPECTED: Array<[string, string, string[]]> = [
  ["kubeproxy_sync_proxy_rules_duration_seconds", "histogram", ["ip_family"]],
  ["kubeproxy_sync_full_proxy_rules_duration_seconds", "histogram", ["ip_family"]],
  ["kubeproxy_sync_partial_proxy_rules_duration_seconds", "histogram", ["ip_family"]],
  ["kubeproxy_network_programming_duration_seconds", "histogram", ["ip_family"]],
  ["kubeproxy_sync_proxy_rules_last_timestamp_seconds", "gauge", ["ip_family"]],
  ["kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "gauge", ["ip_family"]],
  ["kubeproxy_sync_proxy_rules_endpoint_changes_pending", "gauge", []],
  ["kubeproxy_sync_proxy_rules_endpoint_changes_total", "counter", []],
  ["kubeproxy_sync_proxy_rules_service_changes_pending", "gauge", []],
  ["kubeproxy_sync_proxy_rules_service_changes_total", "counter", []],
  ["kubeproxy_sync_proxy_rules_no_local_endpoints_total", "gauge", ["ip_family", "traffic_policy"]],
  ["kubeproxy_sync_proxy_rules_nftables_sync_failures_total", "counter", ["ip_family"]],
  ["kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", "counter", ["ip_family"]],
  ["kubeproxy_conntrack_reconciler_sync_duration_seconds", "histogram", ["ip_family"]],
  ["kubeproxy_conntrack_reconciler_deleted_entries_total", "counter", ["ip_family"]],
  ["kubeproxy_proxy_healthz_total", "counter", ["code"]],
  ["kubeproxy_proxy_livez_total", "counter", ["code"]],
  ["rest_client_requests_total", "counter", ["code", "method", "host"]],
  ["rest_client_request_duration_seconds", "histogram", ["verb", "host"]],
  ["process_cpu_seconds_total", "counter", []],
  ["process_resident_memory_bytes", "gauge", []],
  ["process_virtual_memory_bytes", "gauge", []],
  ["process_start_time_seconds", "gauge", []],
  ["process_open_fds", "gauge", []],
  ["process_max_fds", "gauge", []],
  ["nodejs_heap_size_used_bytes", "gauge", []],
];

Deno.test("bucket layouts match upstream", () => {
  assert.equal(SYNC_BUCKETS.length, 15);
  assert.equal(SYNC_BUCKETS[0], 0.001);
  assert.equal(SYNC_BUCKETS[14], 0.001 * 2 ** 14);
  assert.equal(NETWORK_PROGRAMMING_BUCKETS.length, 1 + 2 + 59 + 12 + 7);
  assert.deepEqual(NETWORK_PROGRAMMING_BUCKETS.slice(0, 5), [0, 0.25, 0.5, 1, 2]);
  assert.equal(NETWORK_PROGRAMMING_BUCKETS.at(-1), 300);
  assert.throws(() => exponentialBuckets(0, 2, 3), /start > 0/);
});

Deno.test("every metric is exposed with its type and labels", async () => {
  const m = createMetrics();
  m.syncProxyRulesLatency.observe({ ip_family: "IPv4" }, 0.02);
  m.syncFullProxyRulesLatency.observe({ ip_family: "IPv4" }, 0.02);
  m.syncPartialProxyRulesLatency.observe({ ip_family: "IPv6" }, 0.003);
  m.networkProgrammingLatency.observe({ ip_family: "IPv4" }, 1.5);
  m.syncProxyRulesLastTimestamp.set({ ip_family: "IPv4" }, 1700000000);
  m.syncProxyRulesLastQueuedTimestamp.set({ ip_family: "IPv4" }, 1700000000);
  m.endpointChangesPending.set(2);
  m.endpointChangesTotal.inc();
  m.serviceChangesPending.set(1);
  m.serviceChangesTotal.inc(3);
  m.noLocalEndpointsTotal.set({ ip_family: "IPv4", traffic_policy: "internal" }, 1);
  m.nftablesSyncFailuresTotal.inc({ ip_family: "IPv4" });
  m.nftablesCleanupFailuresTotal.inc({ ip_family: "IPv6" });
  m.conntrackReconcilerSyncDuration.observe({ ip_family: "IPv4" }, 0.1);
  m.conntrackReconcilerDeletedEntriesTotal.inc({ ip_family: "IPv4" }, 5);
  m.proxyHealthzTotal.inc({ code: "200" });
  m.proxyLivezTotal.inc({ code: "503" });
  m.restClient.requests.inc({ code: "200", method: "GET", host: "10.0.0.1:6443" });
  m.restClient.duration.observe({ verb: "GET", host: "10.0.0.1:6443" }, 0.01);

  const res = await metricsHandler(new Request("http://x/metrics"), m.registry);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /text\/plain/);
  const text = await res.text();
  for (const [name, type, labels] of EXPECTED) {
    assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, "m"), name);
    assert.match(text, new RegExp(`^# HELP ${name} \\S`, "m"), name);
    const sample = type === "histogram" ? `${name}_count` : name;
    const line = text.split("\n").find((l) =>
      l.startsWith(sample + "{") || l.startsWith(sample + " ")
    );
    assert.ok(line, `no sample for ${name}`);
    for (const l of labels) assert.match(line, new RegExp(`${l}="`), `${name} lacks ${l}`);
  }
  assert.match(
    text,
    /kubeproxy_sync_proxy_rules_duration_seconds_bucket\{le="0.016",ip_family="IPv4"\} 0/,
  );
  assert.match(
    text,
    /kubeproxy_sync_proxy_rules_duration_seconds_bucket\{le="0.032",ip_family="IPv4"\} 1/,
  );
  assert.match(text, /kubeproxy_conntrack_reconciler_deleted_entries_total\{ip_family="IPv4"\} 5/);
  assert.match(text, /kubeproxy_proxy_healthz_total\{code="200"\} 1/);
});

Deno.test("metricsHandler rejects other paths and methods", async () => {
  const m = createMetrics();
  assert.equal((await metricsHandler(new Request("http://x/other"), m.registry)).status, 404);
  const post = await metricsHandler(
    new Request("http://x/metrics", { method: "POST" }),
    m.registry,
  );
  assert.equal(post.status, 405);
  await post.body?.cancel();
});

Deno.test("two registries are independent", async () => {
  const a = createMetrics();
  const b = createMetrics();
  a.serviceChangesTotal.inc();
  assert.match(await a.registry.metrics(), /service_changes_total 1/);
  assert.match(await b.registry.metrics(), /service_changes_total 0/);
});

Deno.test("serveMetrics answers over real HTTP", async () => {
  const m = createMetrics();
  m.endpointChangesTotal.inc(7);
  const srv = serveMetrics("127.0.0.1:0", m.registry);
  try {
    const res = await fetch(`http://127.0.0.1:${srv.addr.port}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /^kubeproxy_sync_proxy_rules_endpoint_changes_total 7$/m);
  } finally {
    await srv.shutdown();
  }
});

Deno.test("the metrics port also serves /proxyMode, /healthz and /configz, as upstream", async () => {
  const m = createMetrics();
  const get = (path: string) =>
    metricsHandler(new Request(`http://x${path}`), m.registry, {
      configz: () => ({
        "kubeproxy.config.k8s.io": { mode: "nftables", nftables: { syncPeriod: "30s" } },
      }),
    });
  const mode = await get("/proxyMode");
  assert.equal(mode.status, 200);
  assert.equal(await mode.text(), "nftables");
  assert.equal(await (await get("/healthz")).text(), "ok");
  assert.equal(await (await get("/healthz/ping")).text(), "ok");
  assert.equal(await (await get("/healthz?verbose")).text(), "[+]ping ok\nhealthz check passed\n");
  const cz = await get("/configz");
  assert.match(cz.headers.get("content-type") ?? "", /json/);
  assert.deepEqual(await cz.json(), {
    "kubeproxy.config.k8s.io": { mode: "nftables", nftables: { syncPeriod: "30s" } },
  });
  // Without a configuration to show, /configz is not served.
  const none = await metricsHandler(new Request("http://x/configz"), m.registry);
  assert.equal(none.status, 404);
  await none.body?.cancel();
});
