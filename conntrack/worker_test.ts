import assert from "node:assert/strict";
import type { FakeEntryInput } from "../ffi/conntrack/fake.ts";
import type { ProxyState, ServicePortInfo } from "../proxier/model.ts";
import { reconcile } from "./reconciler.ts";
import { cleanupStale } from "./cleanup.ts";
import { ReconcileWorker, type WorkerClientSpec } from "./worker.ts";
import { FakeConntrack } from "../ffi/conntrack/fake.ts";
import { servicePort } from "../proxier/model_testing.ts";

const FAKE = new URL("../ffi/conntrack/fake.ts", import.meta.url).href;

const DNS: ServicePortInfo = servicePort("ns/dns:", {
  protocol: "UDP",
  clusterIP: "198.19.0.10",
  port: 53,
  nodePort: 30053,
});

const STATE: ProxyState = {
  family: 4,
  services: new Map([[DNS.id, DNS]]),
  endpoints: new Map([[DNS.id, [{
    ip: "198.18.1.1",
    port: 53,
    ready: true,
    serving: true,
    terminating: false,
    isLocal: true,
  }]]]),
  node: { name: "n", labels: {}, ips: ["198.18.100.1"], podCIDRs: [] },
  serviceCIDRs: ["198.19.0.0/16"],
};

function entries(n: number): FakeEntryInput[] {
  return Array.from({ length: n }, (_, i) => ({
    origSrc: `198.18.${200 + (i >> 16)}.${(i >> 8) & 255}`,
    origSport: 1024 + (i & 255),
    origDst: i % 3 === 2 ? "198.18.100.1" : "198.19.0.10",
    origDport: i % 3 === 2 ? 30053 : 53,
    replySrc: i % 2 === 0 ? "198.18.9.9" : "198.18.1.1",
  }));
}

function fake(list: FakeEntryInput[], opts: { interruptAfter?: number } = {}): WorkerClientSpec {
  return { module: FAKE, factory: "openFakeConntrack", args: [list, opts] };
}

Deno.test("worker reconcile gives the same result as the in-thread path", async () => {
  const list = entries(3000);
  const local = reconcile(new FakeConntrack(list), 4, STATE);
  const w = new ReconcileWorker({ client: fake(list) });
  try {
    const remote = await w.reconcile(4, STATE);
    assert.equal(remote.scanned, 3000);
    assert.equal(remote.deleted, local.deleted);
    assert.equal(remote.deleted, 1500);
    assert.deepEqual(remote.byReason, local.byReason);
    // The thread is reused; requests queue.
    const [a, b] = await Promise.all([w.reconcile(4, STATE), w.reconcile(4, STATE)]);
    assert.equal(a.deleted + b.deleted, 3000);
  } finally {
    w.close();
  }
});

Deno.test("worker forwards logs and reports interrupted dumps", async () => {
  const w = new ReconcileWorker({ client: fake(entries(10), { interruptAfter: 4 }) });
  const logs: string[] = [];
  try {
    const r = await w.reconcile(4, STATE, { log: (m) => logs.push(m) });
    assert.equal(r.interrupted, true);
    assert.equal(r.scanned, 4);
    assert.match(logs.join("\n"), /interrupted after 4 entries/);
  } finally {
    w.close();
  }
});

Deno.test("worker surfaces client errors and bad input", async () => {
  const w = new ReconcileWorker({ client: { module: FAKE, factory: "nope", args: [] } });
  try {
    await assert.rejects(w.reconcile(4, STATE), /fake\.ts has no function export nope/);
    await assert.rejects(
      w.reconcile(4, { ...STATE, serviceCIDRs: ["bad"] }),
      /ServiceCIDR "bad" is not a CIDR/,
    );
    await assert.rejects(w.reconcile(6, STATE), /state is for IPv4 but IPv6/);
  } finally {
    w.close();
  }
});

Deno.test("worker keeps the main event loop responsive during a large reconcile", async () => {
  const list = entries(150_000);
  const w = new ReconcileWorker({ client: fake(list) });
  try {
    let ticks = 0, maxGap = 0, last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
      ticks++;
    }, 10);
    const r = await w.reconcile(4, STATE);
    clearInterval(timer);
    assert.equal(r.scanned, 150_000);
    assert.ok(ticks > 0, "timers must fire while the worker runs");
    // Structured-cloning the fixture blocks briefly; the dump itself must not.
    assert.ok(maxGap < 1000, `main thread stalled ${maxGap.toFixed(0)} ms`);
  } finally {
    w.close();
  }
});

Deno.test("worker close fails queued requests and does not restart", async () => {
  const w = new ReconcileWorker({ client: fake(entries(10)) });
  const first = w.reconcile(4, STATE);
  const queued = w.reconcile(4, STATE);
  w.close();
  await assert.rejects(first, /worker closed/);
  await assert.rejects(queued, /worker closed/);
  await assert.rejects(w.reconcile(4, STATE), /worker closed/);
});

Deno.test("worker cleanup deletes what the in-thread cleanup deletes", async () => {
  const list = entries(300);
  const report = {
    servicesWithNewEndpoints: [],
    deletedEndpoints: [{ service: DNS, ip: "198.18.9.9", port: 53 }],
  };
  const local = cleanupStale(new FakeConntrack(list), report, 4);
  const w = new ReconcileWorker({ client: fake(list) });
  try {
    const remote = await w.cleanup(4, report);
    assert.ok(local.deleted > 0, "the report matches some flows");
    assert.equal(remote.deleted, local.deleted);
    assert.equal(remote.scanned, local.scanned);
  } finally {
    w.close();
  }
});

Deno.test("worker reconcile over the entries the syncs posted follows each change", async () => {
  const list = entries(300);
  const w = new ReconcileWorker({ client: fake(list) });
  try {
    // The first update carries every port, whatever ids it is given.
    w.updateIndex(4, STATE, []);
    const first = await w.reconcile(4, STATE);
    assert.equal(first.deleted, reconcile(new FakeConntrack(list), 4, STATE).deleted);
    // DNS's endpoint moves: only its entry is posted, and the next reconcile judges by it.
    const moved: ProxyState = {
      ...STATE,
      endpoints: new Map([[DNS.id, [{ ...STATE.endpoints.get(DNS.id)![0], ip: "198.18.7.7" }]]]),
    };
    w.updateIndex(4, moved, [DNS.id]);
    const after = await w.reconcile(4, moved);
    const local = reconcile(new FakeConntrack(list), 4, moved);
    assert.notEqual(after.deleted, first.deleted);
    assert.equal(after.deleted, local.deleted);
    assert.deepEqual(after.byReason, local.byReason);
    // DNS is deleted: its ClusterIP no longer a frontend, every DNATed flow to it goes.
    const gone: ProxyState = { ...STATE, services: new Map(), endpoints: new Map() };
    w.updateIndex(4, gone, [DNS.id]);
    const deleted = await w.reconcile(4, gone);
    assert.deepEqual(deleted.byReason, reconcile(new FakeConntrack(list), 4, gone).byReason);
  } finally {
    w.close();
  }
});

Deno.test("worker updateIndex rejects a malformed address and falls back to the whole state", async () => {
  const w = new ReconcileWorker({ client: fake(entries(30)) });
  try {
    w.updateIndex(4, STATE, []);
    const bad: ProxyState = {
      ...STATE,
      services: new Map([[DNS.id, { ...DNS, clusterIP: "not-an-ip" }]]),
    };
    assert.throws(() => w.updateIndex(4, bad, [DNS.id]), /ClusterIP of ns\/dns: "not-an-ip"/);
    // Not fed any more: the reconcile builds from the state it is given, and says what is wrong.
    await assert.rejects(w.reconcile(4, bad), /not-an-ip/);
  } finally {
    w.close();
  }
});

Deno.test("worker index: new ServiceCIDRs make the next update a reset", async () => {
  // DNS is deleted but a TCP port keeps its ClusterIP: inside the ServiceCIDR it needs no entry,
  // outside (the ServiceCIDR gone) it does, or DNATed flows to it would be kept.
  const web = servicePort("ns/web:", { protocol: "TCP", clusterIP: "198.19.0.10", port: 80 });
  const list = entries(30);
  const inRange: ProxyState = {
    ...STATE,
    services: new Map([[web.id, web]]),
    endpoints: new Map(),
  };
  const outOfRange: ProxyState = { ...inRange, serviceCIDRs: [] };
  const w = new ReconcileWorker({ client: fake(list) });
  try {
    w.updateIndex(4, inRange, []);
    const a = await w.reconcile(4, inRange);
    assert.deepEqual(a.byReason, reconcile(new FakeConntrack(list), 4, inRange).byReason);
    w.updateIndex(4, outOfRange, []); // no id changed, but the ranges did
    const b = await w.reconcile(4, outOfRange);
    assert.deepEqual(b.byReason, reconcile(new FakeConntrack(list), 4, outOfRange).byReason);
    assert.ok(b.byReason["deleted-frontend"] > 0, "flows to the ClusterIP are judged by it");
  } finally {
    w.close();
  }
});
