import assert from "node:assert/strict";
import { nodeEligible, ProxierHealthServer, ServiceHealthServers } from "./health.ts";
import { createMetrics } from "../metrics.ts";
import { Logger } from "../log.ts";

function clock(start = Date.UTC(2026, 10, 23, 0, 0, 0)) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const quietLog = () => {
  const lines: string[] = [];
  return {
    lines,
    log: new Logger({
      verbosity: 5,
      sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
    }),
  };
};

// deno-lint-ignore no-explicit-any
type HealthBody = any; // parsed JSON whose shape each test asserts

async function get(url: string): Promise<{ status: number; headers: Headers; body: HealthBody }> {
  const r = await fetch(url);
  const text = await r.text();
  return { status: r.status, headers: r.headers, body: text ? JSON.parse(text) : undefined };
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
}

const node = { metadata: {}, spec: {} };

Deno.test("nodeEligible: unknown, deleting and autoscaler-tainted nodes are not eligible", () => {
  assert.equal(nodeEligible(undefined), false);
  assert.equal(nodeEligible(node), true);
  assert.equal(nodeEligible({ metadata: { deletionTimestamp: "2026-11-23T00:00:00Z" } }), false);
  assert.equal(
    nodeEligible({
      spec: { taints: [{ key: "other" }, { key: "ToBeDeletedByClusterAutoscaler" }] },
    }),
    false,
  );
  assert.equal(nodeEligible({ spec: { taints: [{ key: "other" }] } }), true);
});

Deno.test("health: a queued update goes stale after the timeout, updated() heals it", () => {
  const c = clock();
  const hs = new ProxierHealthServer({ healthTimeoutMs: 60_000, now: c.now });
  assert.equal(hs.health().healthy, true);
  assert.equal(hs.health().lastUpdated, "0001-01-01T00:00:00Z");
  hs.updated(4);
  hs.queued("IPv4");
  c.advance(59_999);
  assert.equal(hs.health().healthy, true);
  hs.queued(4); // keeps the oldest queued time
  c.advance(1);
  const h = hs.health();
  assert.equal(h.healthy, false);
  assert.equal(h.status?.IPv4?.healthy, false);
  hs.updated("IPv4");
  assert.equal(hs.health().healthy, true);
});

Deno.test("health: families are tracked separately", () => {
  const c = clock();
  const hs = new ProxierHealthServer({ healthTimeoutMs: 1000, now: c.now });
  hs.updated(4);
  hs.updated(6);
  hs.queued(6);
  c.advance(2000);
  const h = hs.health();
  assert.equal(h.healthy, false);
  assert.equal(h.status?.IPv4?.healthy, true);
  assert.equal(h.status?.IPv6?.healthy, false);
});

Deno.test("/healthz and /livez over HTTP, with metrics", async () => {
  const c = clock();
  const m = createMetrics();
  const hs = new ProxierHealthServer({ healthTimeoutMs: 60_000, now: c.now, metrics: m });
  const addr = hs.serve("127.0.0.1:0");
  const base = `http://127.0.0.1:${addr.port}`;
  try {
    // Node unknown: /healthz 503, /livez 200.
    let r = await get(`${base}/healthz`);
    assert.equal(r.status, 503);
    assert.equal(r.body.nodeEligible, false);
    assert.equal(r.headers.get("x-content-type-options"), "nosniff");
    assert.equal(r.headers.get("content-type"), "application/json");
    r = await get(`${base}/livez`);
    assert.equal(r.status, 200);
    assert.equal(r.body.nodeEligible, undefined);

    hs.setNode(node);
    hs.updated(4);
    c.advance(5000);
    r = await get(`${base}/healthz`);
    assert.equal(r.status, 200);
    assert.deepEqual(Object.keys(r.body), [
      "lastUpdated",
      "currentTime",
      "nodeEligible",
      "healthy",
      "status",
    ]);
    assert.equal(r.body.healthy, true);
    assert.equal(r.body.nodeEligible, true);
    assert.equal(r.body.lastUpdated, r.body.currentTime); // upstream: "now" while healthy
    assert.equal(r.body.status.IPv4.lastUpdated, new Date(c.now() - 5000).toISOString());

    hs.queued(4);
    c.advance(60_000);
    assert.equal((await get(`${base}/healthz`)).status, 503);
    r = await get(`${base}/livez`);
    assert.equal(r.status, 503);
    assert.equal(r.body.healthy, false);

    hs.updated(4);
    hs.setNode({ spec: { taints: [{ key: "ToBeDeletedByClusterAutoscaler" }] } });
    assert.equal((await get(`${base}/healthz`)).status, 503);
    assert.equal((await get(`${base}/livez`)).status, 200);
    const notFound = await fetch(`${base}/other`);
    assert.equal(notFound.status, 404);
    await notFound.body?.cancel();

    const text = await m.registry.metrics();
    assert.match(text, /kubeproxy_proxy_healthz_total\{code="503"\} 3/);
    assert.match(text, /kubeproxy_proxy_healthz_total\{code="200"\} 1/);
    assert.match(text, /kubeproxy_proxy_livez_total\{code="200"\} 2/);
    assert.match(text, /kubeproxy_proxy_livez_total\{code="503"\} 1/);
  } finally {
    await hs.close();
  }
});

Deno.test("a watch down longer than the timeout fails /healthz only", () => {
  const c = clock();
  const hs = new ProxierHealthServer({ healthTimeoutMs: 10_000, now: c.now });
  hs.setNode(node);
  hs.updated(4);
  hs.setWatchHealthy("endpointslices", false);
  c.advance(9_000);
  assert.equal(hs.handle(new Request("http://x/healthz")).status, 200);
  hs.setWatchHealthy("endpointslices", false); // repeated reports keep the first time
  c.advance(1_000);
  const res = hs.handle(new Request("http://x/healthz"));
  assert.equal(res.status, 503);
  assert.equal(hs.handle(new Request("http://x/livez")).status, 200);
  assert.deepEqual(hs.watchesDown(), ["endpointslices"]);
  hs.setWatchHealthy("endpointslices", true);
  assert.equal(hs.handle(new Request("http://x/healthz")).status, 200);
  assert.throws(() => new ProxierHealthServer({ healthTimeoutMs: 0 }), /healthTimeoutMs/);
});

Deno.test("HealthCheckNodePort servers open, answer, update and close", async () => {
  const { log } = quietLog();
  let proxyOk = true;
  const shs = new ServiceHealthServers({
    addresses: ["127.0.0.1"],
    proxyHealthy: () => proxyOk,
    log,
  });
  const p1 = freePort();
  const p2 = freePort();
  try {
    await shs.sync(
      new Map([
        [p1, { service: "ns1/web", localEndpoints: 2 }],
        [p2, { service: "ns2/db", localEndpoints: 0 }],
      ]),
    );
    assert.deepEqual(shs.ports(), [p1, p2].sort((a, b) => a - b));
    let r = await get(`http://127.0.0.1:${p1}/`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, {
      service: { namespace: "ns1", name: "web" },
      localEndpoints: 2,
      serviceProxyHealthy: true,
    });
    assert.equal(r.headers.get("x-content-type-options"), "nosniff");
    assert.equal(r.headers.get("x-load-balancing-endpoint-weight"), "2");
    r = await get(`http://127.0.0.1:${p2}/anything`);
    assert.equal(r.status, 503);
    assert.equal(r.body.localEndpoints, 0);

    proxyOk = false;
    r = await get(`http://127.0.0.1:${p1}/`);
    assert.equal(r.status, 503);
    assert.equal(r.body.serviceProxyHealthy, false);
    proxyOk = true;

    // Counts update in place; p2 goes away.
    await shs.sync(new Map([[p1, { service: "ns1/web", localEndpoints: 0 }]]));
    assert.deepEqual(shs.ports(), [p1]);
    assert.equal((await get(`http://127.0.0.1:${p1}/`)).status, 503);
    await assert.rejects(fetch(`http://127.0.0.1:${p2}/`));

    // Port reassigned to another service: the listener is replaced.
    await shs.sync(new Map([[p1, { service: "ns3/other", localEndpoints: 1 }]]));
    r = await get(`http://127.0.0.1:${p1}/`);
    assert.deepEqual(r.body.service, { namespace: "ns3", name: "other" });
  } finally {
    await shs.close();
  }
  assert.deepEqual(shs.ports(), []);
});

Deno.test("a port that fails to bind is logged and retried on the next sync", async () => {
  const { log, lines } = quietLog();
  const shs = new ServiceHealthServers({ addresses: ["127.0.0.1"], log });
  const blocker = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (blocker.addr as Deno.NetAddr).port;
  try {
    const want = new Map([[port, { service: "ns/svc", localEndpoints: 1 }]]);
    await shs.sync(want);
    assert.deepEqual(shs.ports(), []);
    assert.ok(lines.some((l) => l.startsWith("E") && l.includes("Failed to start healthcheck")));
    blocker.close();
    await shs.sync(want);
    assert.deepEqual(shs.ports(), [port]);
    assert.equal((await get(`http://127.0.0.1:${port}/`)).status, 200);
  } finally {
    try {
      blocker.close();
    } catch { /* already closed */ }
    await shs.close();
  }
});
