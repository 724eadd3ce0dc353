import assert from "node:assert/strict";
import { FakeApiServer, type KObject } from "../../tests/fakeapi/server.ts";
import { ApiProbe } from "./api_probe.ts";
import { startProxyInformers } from "./informers.ts";
import { type InformerHandlers, WatchSupervisor } from "./watch_supervisor.ts";
import { ApiFetch } from "./api_fetch.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { pagedList } from "./paged_list.ts";
import { Logger } from "../log.ts";
import { waitForSync } from "./testdata/informers_wait.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function svc(name: string, labels: Record<string, string> = {}): KObject {
  return {
    kind: "Service",
    metadata: { name, namespace: "ns1", labels },
    spec: { clusterIP: "198.18.0.1" },
  };
}

type Ev = string;
function recorder() {
  const events: Ev[] = [];
  let synced = 0;
  const name = (o: unknown) => (o as KObject).metadata?.name;
  const rv = (o: unknown) => (o as KObject).metadata?.resourceVersion;
  const handlers: InformerHandlers<unknown> = {
    onAdd: (o) => events.push(`add ${name(o)}`),
    onUpdate: (a, b) => events.push(`update ${name(b)} ${rv(a)}->${rv(b)}`),
    onDelete: (o) => events.push(`delete ${name(o)}`),
    onSynced: () => synced++,
  };
  return { events, handlers, synced: () => synced };
}

function quietLog() {
  const lines: string[] = [];
  return {
    lines,
    log: new Logger({
      verbosity: 4,
      sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
    }),
  };
}

function setup(opts: { bookmarkIntervalMs?: number; serviceCIDRs?: boolean } = {}) {
  const api = FakeApiServer.start({ bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 50, ...opts });
  const conn = new ApiFetch(kubeConfigFromString(api.kubeconfigYaml()).creds);
  return { api, conn };
}

function serviceSupervisor(conn: ApiFetch, handlers: InformerHandlers<unknown>, extra = {}) {
  const health: Array<[string, boolean]> = [];
  const { log, lines } = quietLog();
  const sup = new WatchSupervisor<unknown>({
    name: "services",
    api: conn,
    path: "/api/v1/services",
    list: (s) => pagedList(conn, "/api/v1/services", s, (o) => o),
    handlers,
    onHealth: (n, ok) => health.push([n, ok]),
    log,
    initialBackoffMs: 50,
    maxBackoffMs: 200,
    watchdogMs: 400,
    ...extra,
  });
  return { sup, health, lines };
}

Deno.test("supervisor delivers adds, updates with the old object, deletes; synced once", async () => {
  const { api, conn } = setup();
  const r = recorder();
  const { sup, health } = serviceSupervisor(conn, r.handlers);
  try {
    api.apply(svc("a"));
    sup.start();
    await until(() => sup.synced, "synced");
    assert.equal(sup.healthy, true);
    assert.deepEqual(health, [["services", true]]);
    api.apply(svc("b"));
    api.apply(svc("a", { v: "2" }));
    api.remove("Service", "ns1", "b");
    await until(() => r.events.length === 4, "events");
    assert.deepEqual(r.events, ["add a", "add b", "update a 1->3", "delete b"]);
    assert.equal(r.synced(), 1);
    // Bookmarks were requested.
    assert.ok(api.requests.some((q) => q.includes("allowWatchBookmarks=true")));
    assert.deepEqual([...sup.snapshot().keys()], ["ns1/a"]);
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("HTTP 500 on the watch: restart with backoff, deliver only the difference", async () => {
  const { api, conn } = setup();
  const r = recorder();
  const { sup, health, lines } = serviceSupervisor(conn, r.handlers);
  try {
    api.apply(svc("keep"));
    api.apply(svc("change"));
    api.apply(svc("gone"));
    sup.start();
    await until(() => sup.synced && api.openWatches === 1, "synced");
    r.events.length = 0;
    // The next watch request fails with 500, which stops a bare client-node informer for good.
    api.failNext(1, 500, (p) => p.includes("watch=true"));
    api.dropWatches();
    api.apply(svc("change", { v: "2" }));
    api.remove("Service", "ns1", "gone");
    api.apply(svc("new"));
    await until(() => r.events.length === 3, "diff events");
    assert.deepEqual(r.events.sort(), ["add new", "delete gone", "update change 2->4"]);
    assert.ok(sup.restarts >= 1);
    assert.equal(r.synced(), 1);
    assert.ok(lines.some((l) => l.includes("Restarting informer") && l.includes("500")));
    await until(() => sup.healthy, "healthy again");
    assert.deepEqual(health.map(([, ok]) => ok), [true, false, true]);
    // First list from the watch cache (RV 0), the re-list not older than what was seen.
    const lists = api.requests.filter((q) =>
      q.startsWith("/api/v1/services?") && !q.includes("watch=")
    );
    assert.match(lists[0], /resourceVersion=0/);
    assert.doesNotMatch(lists[0], /resourceVersionMatch/);
    assert.match(lists.at(-1)!, /resourceVersion=3&resourceVersionMatch=NotOlderThan/);
    // Still live after the restart.
    api.apply(svc("later"));
    await until(() => r.events.includes("add later"), "live event");
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("failed lists at start-up are retried with capped backoff", async () => {
  const { api, conn } = setup();
  const r = recorder();
  const { sup, health } = serviceSupervisor(conn, r.handlers);
  try {
    api.apply(svc("a"));
    api.failNext(4, 500, (p) => p.startsWith("/api/v1/services") && !p.includes("watch="));
    const t0 = Date.now();
    sup.start();
    await until(() => sup.synced, "synced");
    const took = Date.now() - t0;
    // 50 + 100 + 200 + 200 (capped) ms of backoff.
    assert.ok(took >= 500, `took ${took} ms`);
    assert.ok(took < 3000, `took ${took} ms`);
    assert.equal(sup.restarts, 4);
    assert.deepEqual(r.events, ["add a"]);
    assert.deepEqual(health, [["services", true]]); // it was never healthy before
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("an API server crash mid-watch is noticed at once and recovered", async () => {
  const { api, conn } = setup();
  const r = recorder();
  // A long watchdog: recovery must not depend on it.
  const { sup, lines } = serviceSupervisor(conn, r.handlers, { watchdogMs: 600_000 });
  try {
    api.apply(svc("a"));
    sup.start();
    await until(() => sup.synced && api.openWatches === 1, "synced");
    await api.down(); // cuts the watch mid-stream, no clean end
    api.apply(svc("b"));
    api.remove("Service", "ns1", "a");
    api.up();
    await until(() => r.events.length === 3, "events after restart");
    assert.deepEqual(r.events, ["add a", "add b", "delete a"]);
    assert.ok(lines.some((l) => l.includes("list/watch failed")), lines.join("\n"));
    assert.ok(!lines.some((l) => l.includes("no watch event or bookmark")), lines.join("\n"));
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("a watch that goes silent is restarted by the watchdog", async () => {
  const { api, conn } = setup({ bookmarkIntervalMs: 60_000 });
  const r = recorder();
  const { sup, lines } = serviceSupervisor(conn, r.handlers, { watchdogMs: 300 });
  try {
    api.apply(svc("a"));
    sup.start();
    await until(() => sup.synced, "synced");
    await until(() => lines.some((l) => l.includes("no watch event or bookmark")), "watchdog");
    assert.deepEqual(r.events, ["add a"], "a restart re-delivers nothing unchanged");
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("410 after compaction: the informer re-lists at once, no duplicate deliveries", async () => {
  const { api, conn } = setup({ bookmarkIntervalMs: 10_000 });
  const r = recorder();
  const { sup } = serviceSupervisor(conn, r.handlers, { watchdogMs: 60_000 });
  try {
    api.apply(svc("a"));
    api.apply(svc("b"));
    sup.start();
    await until(() => sup.synced && api.openWatches === 1, "synced");
    api.dropWatches();
    api.apply(svc("c"));
    api.remove("Service", "ns1", "a");
    api.compact();
    await until(() => r.events.length === 4, "events");
    assert.deepEqual(r.events.slice(2).sort(), ["add c", "delete a"]);
    assert.equal(sup.restarts, 0); // handled by the informer's own 410 path
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("a misbehaving watch: bad lines and unknown events are logged and skipped", async () => {
  const { api, conn } = setup({ bookmarkIntervalMs: 10_000 });
  const r = recorder();
  const { sup, lines } = serviceSupervisor(conn, r.handlers, { watchdogMs: 60_000 });
  try {
    api.apply(svc("a"));
    sup.start();
    await until(() => sup.synced && api.openWatches === 1, "synced");
    api.sendRaw("Service", '{"type":"MODIFIED","object":{"metadata":{"na'); // truncated
    api.sendRaw("Service", '{"type":"RESYNC","object":{"metadata":{"name":"x"}}}');
    api.sendRaw("Service", '{"type":"ADDED","object":"not an object"}');
    api.apply(svc("b")); // the stream goes on
    await until(() => r.events.includes("add b"), "the next event");
    assert.deepEqual(r.events, ["add a", "add b"]);
    assert.equal(sup.restarts, 0);
    const text = lines.join("\n");
    assert.match(text, /Watch sent a line that is not JSON; skipped.*resource="services"/);
    assert.match(text, /does not understand; skipped.*type="RESYNC"/);
    assert.match(text, /does not understand; skipped.*type="ADDED" object="string"/);
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("a slow list is waited for and said, then delivered", async () => {
  const { api, conn } = setup();
  const r = recorder();
  const { sup, lines } = serviceSupervisor(conn, r.handlers, { slowListWarnMs: 100 });
  try {
    api.apply(svc("a"));
    api.delayNext(450, (p) => p.startsWith("/api/v1/services") && !p.includes("watch="));
    sup.start();
    await until(() => sup.synced, "synced");
    assert.deepEqual(r.events, ["add a"]);
    assert.ok(
      lines.filter((l) => /Listing is slow; still waiting/.test(l)).length >= 2,
      lines.join("\n"),
    );
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("proxy informers: selectors, own node only, ServiceCIDR 404 tolerated", async () => {
  const { api, conn } = setup({ serviceCIDRs: false });
  const svcs = recorder();
  const slices = recorder();
  const node = recorder();
  const cidrs = recorder();
  const { log, lines } = quietLog();
  api.apply(svc("plain"));
  api.apply(svc("other-proxy", { "service.kubernetes.io/service-proxy-name": "x" }));
  const slice = (name: string, labels: Record<string, string>) =>
    api.apply({
      kind: "EndpointSlice",
      metadata: { name, namespace: "ns1", labels },
      endpoints: [],
    });
  slice("s1", { "kubernetes.io/service-name": "plain" });
  slice("s2", { "service.kubernetes.io/headless": "" });
  slice("s3", { "service.kubernetes.io/service-proxy-name": "x" });
  api.apply({ kind: "Node", metadata: { name: "me" } });
  api.apply({ kind: "Node", metadata: { name: "someone-else" } });
  const inf = startProxyInformers({
    api: conn,
    nodeName: "me",
    handlers: {
      services: svcs.handlers,
      endpointSlices: slices.handlers,
      node: node.handlers,
      serviceCIDRs: cidrs.handlers,
    },
    log,
    timing: { initialBackoffMs: 50, maxBackoffMs: 200, watchdogMs: 2000 },
  });
  try {
    await waitForSync(inf, 5000);
    assert.equal(inf.synced(), true);
    assert.deepEqual(svcs.events, ["add plain"]);
    assert.deepEqual(slices.events, ["add s1"]);
    assert.deepEqual(node.events, ["add me"]);
    assert.deepEqual(cidrs.events, []);
    assert.equal(cidrs.synced(), 1);
    assert.ok(lines.some((l) => l.includes("API resource not served")));
    api.apply({ kind: "Node", metadata: { name: "someone-else", labels: { x: "1" } } });
    api.apply({ kind: "Node", metadata: { name: "me", labels: { x: "1" } } });
    await until(() => node.events.length === 2, "node update");
    assert.match(node.events[1], /^update me /);
    const sup = inf.supervisors.find((s) => s.name === "servicecidrs")!;
    assert.equal(sup.restarts, 0);
  } finally {
    await inf.stop();
    await api.close();
  }
});

Deno.test("waitForSync times out naming the missing informers", async () => {
  const { api, conn } = setup();
  api.failNext(1000, 500, (p) => p.startsWith("/api/v1/nodes"));
  const { log } = quietLog();
  const inf = startProxyInformers({
    api: conn,
    nodeName: "me",
    handlers: { node: recorder().handlers },
    log,
    timing: { initialBackoffMs: 20, maxBackoffMs: 50, watchdogMs: 2000 },
  });
  try {
    await assert.rejects(waitForSync(inf, 300), /not synced after 300 ms: node/);
  } finally {
    await inf.stop();
    await api.close();
  }
});

Deno.test("ApiProbe: a success after failures restarts the watches, once", async () => {
  let up = true;
  const reasons: string[] = [];
  const probe = new ApiProbe(
    () => (up ? Promise.resolve() : Promise.reject(new Error("connection refused"))),
    (r) => reasons.push(r),
    0,
  );
  await probe.probe();
  assert.deepEqual(reasons, [], "healthy: nothing to do");
  up = false;
  await probe.probe();
  await probe.probe();
  assert.deepEqual(reasons, [], "still down");
  up = true;
  await probe.probe();
  await probe.probe();
  assert.deepEqual(reasons, ["API server was unreachable"], "one restart on recovery");
});

Deno.test("ApiProbe: a check that hangs counts as a failure", async () => {
  const reasons: string[] = [];
  let hang = true;
  const probe = new ApiProbe(
    () => (hang ? new Promise<void>(() => {}) : Promise.resolve()),
    (r) => reasons.push(r),
    0,
    undefined,
    50,
  );
  await probe.probe();
  hang = false;
  await probe.probe();
  assert.equal(reasons.length, 1);
});
