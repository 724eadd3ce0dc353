import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import { Transaction } from "../../ffi/nftables/types.ts";
import {
  type MutableState,
  noStale,
  serviceId,
  syntheticConfig,
  syntheticEndpoints,
  syntheticService,
  syntheticState,
} from "../../tests/support/synthetic.ts";
import { Proxier, type ProxierInput, type ProxierOptions, type SyncResult } from "./proxier.ts";
import { canonicalBuckets } from "./testing.ts";

const OPTS = { services: 0, endpointsPerService: 1, nodePortEvery: 0, udpEvery: 0 };

class Clock {
  t = 1000;
  now = () => this.t;
}

function setup(
  fake = new MemoryNftables("ip", "kube-proxy"),
  opts: Partial<ProxierOptions> = {},
) {
  const clock = new Clock();
  const p = new Proxier({
    client: fake,
    config: syntheticConfig(),
    now: clock.now,
    trimMemory: false,
    ...opts,
  });
  return { fake, clock, p };
}

function input(
  state: MutableState,
  changed: string[] = [],
  deleted: string[] = [],
): ProxierInput {
  return { state, changed: new Set(changed), deleted: new Set(deleted), stale: noStale() };
}

function must(r: Promise<SyncResult>): Promise<SyncResult> {
  return r;
}

/** A dump with generation suffixes removed: adoption moves to another generation. */
function sameModuloGen(dump: string): string {
  return dump.replace(
    /(dnat-(?:tcp|udp|sctp)-\d+|endpoints-(?:large-)?(?:tcp|udp|sctp))-g\d+/g,
    "$1",
  );
}

/** The dump a fresh proxier produces for `state` on an empty table. */
async function freshDump(state: MutableState): Promise<string> {
  const { fake, p } = setup();
  await must(p.sync(input(state)));
  return fake.dump();
}

/** Lets everything stale be deleted, then returns the dump. */
async function settledDump(p: Proxier, clock: Clock, fake: MemoryNftables, state: MutableState) {
  clock.t += 5000;
  await must(p.sync(input(state)));
  return fake.dump();
}

function addService(state: MutableState, i: number, eps = 1) {
  const o = { ...OPTS, endpointsPerService: eps };
  const svc = syntheticService(i, o);
  state.services.set(svc.id, svc);
  state.endpoints.set(svc.id, syntheticEndpoints(i, o));
  return svc.id;
}

Deno.test("proxier: an endpoint change is a few element ops; partial equals a fresh full sync", async () => {
  const state = syntheticState({ ...OPTS, services: 20, endpointsPerService: 3 });
  const { fake, clock, p } = setup();
  const first = await must(p.sync(input(state)));
  assert.equal(first.full, true);
  const runs = fake.opCounts.length;

  const same = await must(p.sync(input(state)));
  assert.equal(same.full, false);
  assert.equal(same.ops, 0);
  assert.equal(fake.opCounts.length, runs, "no transaction at all for an unchanged sync");
  const noop = await must(p.sync(input(state, [serviceId(3)])));
  assert.equal(noop.ops, 0, "a 'changed' port whose rules are identical costs nothing");

  // Add a service with one endpoint: its class-set element, a bucket, a ClusterIP. The class
  // dnat-tcp-1 was ready (with -2 and -4, beside -3 in use): its set and dispatch rule are
  // there, so nothing but elements.
  const id = addService(state, 100);
  const add = await must(p.sync(input(state, [id])));
  const classes = (await fake.listChain("service-classes"))!.rules.length;
  assert.equal(classes, 4, "dnat-tcp-1 to dnat-tcp-4");
  assert.equal(add.ops, 3, "3 elements");
  assert.equal(await settledDump(p, clock, fake, state), await freshDump(state));

  // Swap its endpoint: one bucket element replaced; no chain, no verdict change.
  state.endpoints.set(id, syntheticEndpoints(100, OPTS, 7));
  const swap = await must(p.sync(input(state, [id])));
  assert.equal(swap.ops, 2, "delete + add of one bucket element");
  const tx = fake.lastTransaction!;
  assert.ok(tx.ops.every((o) => o.obj.kind === "element"), "elements only");

  // Two more endpoints: buckets added, the verdict re-pointed to the existing dnat-tcp-3.
  const more = syntheticEndpoints(200, { ...OPTS, endpointsPerService: 2 });
  state.endpoints.set(id, [...state.endpoints.get(id)!, ...more]);
  const grow = await must(p.sync(input(state, [id])));
  assert.equal(grow.ops, 4, "add buckets 1 and 2, move to the dnat-tcp-3 set (delete + add)");
  assert.equal(await settledDump(p, clock, fake, state), await freshDump(state));

  // Delete the service: its elements go; no chain was ever its own.
  state.services.delete(id);
  state.endpoints.delete(id);
  const del = await must(p.sync(input(state, [], [id])));
  assert.equal(del.ops, 5, "verdict, three buckets, ClusterIP");
  assert.equal(await settledDump(p, clock, fake, state), await freshDump(state));
});

Deno.test("proxier: an unused class chain goes stale and is deleted after the delay", async () => {
  // 20 endpoints: past the reserved counts (1-16), whose chains stay.
  const state = syntheticState({ ...OPTS, services: 3 });
  const { fake, clock, p } = setup();
  await must(p.sync(input(state)));
  const id = addService(state, 9, 20);
  await must(p.sync(input(state, [id])));
  assert.ok((await fake.listChains()).includes("dnat-tcp-20"));
  state.services.delete(id);
  state.endpoints.delete(id);
  const del = await must(p.sync(input(state, [], [id])));
  assert.ok(del.followUpMs !== undefined && del.followUpMs <= 1000);
  assert.ok(p.written.staleChains.has("dnat-tcp-20"));
  assert.ok((await fake.listChains()).includes("dnat-tcp-20"), "kept until the delay passed");
  clock.t += 500;
  assert.equal((await must(p.sync(input(state)))).deletedChains, 0, "not before the delay");
  clock.t += 600;
  const late = await must(p.sync(input(state)));
  assert.equal(late.deletedChains, 1);
  assert.equal(late.followUpMs, undefined);
  assert.ok(!(await fake.listChains()).includes("dnat-tcp-20"));
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: a stale class chain reused before deletion is kept", async () => {
  const state = syntheticState({ ...OPTS, services: 3 });
  const { fake, clock, p } = setup();
  await must(p.sync(input(state)));
  const id = addService(state, 9, 20);
  await must(p.sync(input(state, [id])));
  state.endpoints.set(id, syntheticEndpoints(9, { ...OPTS, endpointsPerService: 1 }));
  await must(p.sync(input(state, [id])));
  assert.ok(p.written.staleChains.has("dnat-tcp-20"));
  state.endpoints.set(id, syntheticEndpoints(9, { ...OPTS, endpointsPerService: 20 }));
  const back = await must(p.sync(input(state, [id])));
  assert.ok(!p.written.staleChains.has("dnat-tcp-20"));
  const recreated = fake.lastTransaction!.ops.some((o) =>
    o.obj.kind === "chain" && o.obj.name === "dnat-tcp-20"
  );
  assert.ok(!recreated, "the class chain is not re-created");
  assert.ok(back.ops > 0);
  clock.t += 5000;
  assert.equal((await must(p.sync(input(state)))).deletedChains, 0);
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: a failed transaction makes the next sync full, fresh, and keeps the stale report", async () => {
  const state = syntheticState({ ...OPTS, services: 5, udpEvery: 1 });
  const { fake, clock, p } = setup();
  await must(p.sync(input(state)));
  const realRun = fake.run.bind(fake);
  let failNext = true;
  fake.run = (tx: Transaction) => {
    if (failNext) {
      failNext = false;
      return Promise.reject(new Error("injected failure"));
    }
    return realRun(tx);
  };
  const id = addService(state, 50);
  const svc = state.services.get(id)!;
  const report = { servicesWithNewEndpoints: [svc], deletedEndpoints: [] };
  await assert.rejects(
    p.sync({ state, changed: new Set([id]), deleted: new Set(), stale: report }),
    /injected failure/,
  );
  assert.equal(p.nextSyncFull, true);
  const r = await must(p.sync(input(state)));
  assert.equal(r.full, true);
  assert.equal(p.written.gen, 1, "a failure moves the endpoint maps to a fresh generation");
  assert.deepEqual(r.stale.servicesWithNewEndpoints, [svc], "stale report survives the failure");
  const dump = await settledDump(p, clock, fake, state);
  assert.ok(!/map endpoints-tcp \{/.test(dump), "the old generation is deleted");
  assert.equal(sameModuloGen(dump), await freshDump(state));
});

Deno.test("proxier: context change, node change and the engine's periodic check force full syncs", async () => {
  const state = syntheticState({ ...OPTS, services: 4 });
  const { fake, p } = setup();
  assert.equal((await must(p.sync(input(state)))).full, true);
  assert.equal((await must(p.sync(input(state)))).full, false);
  assert.equal((await must(p.sync({ ...input(state), contextChanged: true }))).full, true);
  state.serviceCIDRs = ["198.18.0.0/15"];
  const ctx = await must(p.sync(input(state)));
  assert.equal(ctx.full, true, "ServiceCIDR change alters the context key");
  assert.ok(ctx.ops > 0 && ctx.ops < 10, `only the cluster-ips-check chain changes (${ctx.ops})`);
  // The proxier keeps no clock of its own: the engine asks (agent/engine.ts).
  assert.equal((await must(p.sync(input(state)))).full, false);
  p.requestFullSync("periodic check against the kernel");
  const periodic = await must(p.sync(input(state)));
  assert.equal(periodic.full, true);
  assert.equal(periodic.ops, 0, "a no-change full sync writes nothing");
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: restart adoption moves to a fresh generation without flushing the table", async () => {
  const old = syntheticState({ ...OPTS, services: 10, endpointsPerService: 2, nodePortEvery: 3 });
  const first = setup();
  await must(first.p.sync(input(old)));
  // The new process sees a different cluster: some services gone, some changed, some new.
  const now = syntheticState({ ...OPTS, services: 10, endpointsPerService: 2, nodePortEvery: 3 });
  for (const i of [2, 3]) {
    now.services.delete(serviceId(i));
    now.endpoints.delete(serviceId(i));
  }
  now.endpoints.set(serviceId(5), syntheticEndpoints(5, { ...OPTS, endpointsPerService: 3 }, 7));
  addService(now, 40, 2);
  const second = setup(first.fake);
  const r = await must(second.p.sync(input(now)));
  assert.equal(r.full, true);
  assert.equal(second.p.written.gen, 1);
  const tx = first.fake.lastTransaction!;
  assert.ok(
    !tx.ops.some((o) => o.obj.kind === "table" && o.verb !== "add"),
    "the table is never flushed or deleted",
  );
  assert.ok(
    !tx.ops.some((o) =>
      o.obj.kind === "chain" && o.verb === "delete" && !/^(filter|nat)-/.test(o.obj.name)
    ),
    "no chain deleted in the adoption transaction (base chains are re-created in place)",
  );
  const dump = await settledDump(second.p, second.clock, first.fake, now);
  assert.equal(sameModuloGen(dump), await freshDump(now));
  const third = setup(first.fake);
  await must(third.p.sync(input(now)));
  assert.equal(third.p.written.gen, 0, "generations alternate once the old one is gone");
});

Deno.test("proxier: full sync repairs a deleted table, missing elements and foreign chains", async () => {
  const state = syntheticState({ ...OPTS, services: 6, nodePortEvery: 2 });
  const { fake, clock, p } = setup();
  await must(p.sync(input(state)));
  const want = fake.dump();

  // Tamper: drop an element, add a foreign chain and a foreign element.
  const [victim] = await fake.listElements("set", "frontends-dnat-tcp-1");
  const tamper = new Transaction()
    .delete({ kind: "element", set: "frontends-dnat-tcp-1", key: victim.key })
    .add({ kind: "chain", name: "intruder" })
    .add({ kind: "element", set: "cluster-ips", key: ["198.18.250.250"] });
  await fake.run(tamper);
  p.requestFullSync("test");
  const fix = await must(p.sync(input(state)));
  assert.equal(fix.full, true);
  assert.ok(fix.ops <= 16, `repair took ${fix.ops} ops`);
  assert.equal(await settledDump(p, clock, fake, state), want);

  // The table vanishes (`nft delete table ip kube-proxy`): the next full sync restores it.
  await fake.run(new Transaction().delete({ kind: "table" }));
  const partial = await must(p.sync(input(state)));
  assert.equal(partial.ops, 0, "partial syncs do not notice");
  p.requestFullSync("periodic");
  const cold = await must(p.sync(input(state)));
  assert.equal(cold.full, true);
  assert.equal(fake.dump(), want);
});

Deno.test("proxier: a chunked cold start carries whole services in each transaction", async () => {
  const state = syntheticState({ ...OPTS, services: 30, endpointsPerService: 2, nodePortEvery: 4 });
  const fake = new MemoryNftables("ip", "kube-proxy");
  const seen: Transaction[] = [];
  const realRun = fake.run.bind(fake);
  fake.run = (tx: Transaction) => {
    seen.push(tx);
    return realRun(tx);
  };
  const { p } = setup(fake, { maxOpsPerTransaction: 60 });
  const r = await must(p.sync(input(state)));
  assert.ok(r.txs >= 4, `expected several transactions, got ${r.txs}`);
  // Each service's verdict and its buckets land in the same transaction.
  for (const tx of seen) {
    const keys = (map: string) =>
      tx.ops.filter((o) => o.obj.kind === "element" && o.obj.map === map).map((o) =>
        (o.obj as { key: string[] }).key[0]
      );
    const verdicts = new Set(keys("service-ips"));
    for (const k of keys("endpoints")) assert.ok(verdicts.has(k), `${k}: buckets without verdict`);
  }
  assert.equal(fake.dump(), await freshDump(state));
  const again = await must(p.sync(input(state)));
  assert.equal(again.ops, 0, "the written state matches after a chunked cold start");
});

Deno.test("proxier: a full sync steps aside once for a waiting change", async () => {
  const state = syntheticState({ ...OPTS, services: 40 });
  let waiting = false;
  const { fake, p } = setup(undefined, { shouldYield: () => waiting, yieldEveryMs: 0 });
  const cold = await must(p.sync(input(state)));
  assert.equal(cold.preempted, undefined, "a cold start never steps aside");
  p.requestFullSync("periodic");
  const id = serviceId(3);
  state.endpoints.set(id, syntheticEndpoints(3, OPTS, 99));
  waiting = true;
  const first = await must(p.sync(input(state)));
  assert.equal(first.preempted, true);
  assert.equal(first.ops, 0);
  waiting = false;
  const change = await must(p.sync(input(state, [id])));
  assert.equal(change.full, false);
  assert.equal(change.followUpMs, 0, "the full sync is asked for right after");
  assert.equal(change.ops, 2);
  assert.equal(fake.dump(), await freshDump(state), "the change is programmed");
  waiting = true; // no second preemption in a row
  const full = await must(p.sync(input(state)));
  assert.equal(full.full, true);
  assert.equal(full.preempted, undefined);
  assert.equal(full.ops, 0);
});

Deno.test("proxier: a cold start failing midway is adopted by the next full sync", async () => {
  const state = syntheticState({ ...OPTS, services: 30, endpointsPerService: 2 });
  const fake = new MemoryNftables("ip", "kube-proxy");
  const realRun = fake.run.bind(fake);
  let n = 0;
  fake.run = (tx: Transaction) =>
    n++ === 2 ? Promise.reject(new Error("chunk 3 fails")) : realRun(tx);
  const { clock, p } = setup(fake, { maxOpsPerTransaction: 40 });
  await assert.rejects(p.sync(input(state)), /chunk 3 fails/);
  const landed = await fake.listElements("map", "endpoints-tcp");
  assert.ok(landed.length > 0, "earlier chunks landed");
  const r = await must(p.sync(input(state)));
  assert.equal(r.full, true);
  const dump = await settledDump(p, clock, fake, state);
  assert.equal(sameModuloGen(dump), await freshDump(state));
});

Deno.test("proxier: adoption re-creates a base chain whose priority changed", async () => {
  const state = syntheticState({ ...OPTS, services: 3 });
  const fake = new MemoryNftables("ip", "kube-proxy");
  // An older version left nat-output at another priority.
  await fake.run(
    new Transaction()
      .add({ kind: "table", comment: "rules for kube-proxy" })
      .add({ kind: "chain", name: "nat-output", type: "nat", hook: "output", priority: -90 })
      .add({ kind: "rule", chain: "nat-output", rule: "counter" }),
  );
  const { clock, p } = setup(fake);
  await must(p.sync(input(state)));
  const chain = fake.state()!.chains.get("nat-output")!.chain;
  assert.equal(chain.priority, -100);
  assert.equal(await settledDump(p, clock, fake, state), await freshDump(state));
});

Deno.test("build-context warnings (loopback NodePort addresses) are logged once per context", async () => {
  const logs: string[] = [];
  const config = { ...syntheticConfig(), nodePortAddresses: ["127.0.0.0/8"] };
  const { p } = setup(undefined, { config, log: (_l, m) => logs.push(m) });
  const state = syntheticState({ ...OPTS, services: 1 });
  await must(p.sync(input(state)));
  await must(p.sync(input(state)));
  const hits = logs.filter((m) => /do not serve NodePorts on loopback/.test(m));
  assert.equal(hits.length, 1, logs.join("\n"));
});

Deno.test("proxier: changes a preempted full sync took are written by the next sync, under churn too", async () => {
  const state = syntheticState({ ...OPTS, services: 40 });
  const { fake, p } = setup(undefined, { shouldYield: () => true, yieldEveryMs: 0 });
  await must(p.sync(input(state)));
  p.requestFullSync("periodic check");
  // The change is in the preempted sync's own input: the tracker has handed it over already.
  const a = serviceId(3), b = serviceId(7), c = serviceId(9);
  state.endpoints.set(a, syntheticEndpoints(3, OPTS, 98));
  const first = await must(p.sync(input(state, [a])));
  assert.equal(first.preempted, true);
  // Churn goes on: every later sync has other changes.
  state.endpoints.set(b, syntheticEndpoints(7, OPTS, 97));
  const second = await must(p.sync(input(state, [b])));
  assert.equal(second.full, false);
  assert.equal(
    fake.dump(),
    await freshDump(state),
    "both the carried and the new change are written",
  );
  state.endpoints.set(c, syntheticEndpoints(9, OPTS, 96));
  const third = await must(p.sync(input(state, [c])));
  assert.equal(third.full, true, "the full sync runs even though changes keep coming");
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: a Service scaled to one is one transaction of elements (one and two are ready)", async () => {
  const state = syntheticState({ ...OPTS, services: 5, endpointsPerService: 10 });
  const { fake, p } = setup();
  await must(p.sync(input(state)));
  const rules = async () =>
    (await fake.listChain("service-classes"))!.rules.map((r) => r.rule.split(" goto ")[1]);
  assert.deepEqual(await rules(), [
    "dnat-tcp-1",
    "dnat-tcp-2",
    "dnat-tcp-9",
    "dnat-tcp-10",
    "dnat-tcp-11",
  ]);

  const seen: Transaction[] = [];
  const run = fake.run.bind(fake);
  fake.run = (tx) => (seen.push(tx), run(tx));
  state.endpoints.set(serviceId(1), syntheticEndpoints(1, { ...OPTS, endpointsPerService: 1 }, 50));
  await must(p.sync(input(state, [serviceId(1)])));
  assert.equal(seen.length, 1, "no readiness write after the move");
  assert.ok(seen[0].ops.every((o) => o.obj.kind === "element"), "elements only");
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: a Service scaled by one moves to a ready class; readiness follows its elements", async () => {
  const state = syntheticState({ ...OPTS, services: 5, endpointsPerService: 3 });
  const { fake, clock, p } = setup();
  await must(p.sync(input(state)));
  // 3 in use: 1, 2 and 4 ready with it, each with its set and dispatch rule.
  const rules = async () =>
    (await fake.listChain("service-classes"))!.rules.map((r) => r.rule.split(" goto ")[1]);
  assert.deepEqual(await rules(), ["dnat-tcp-1", "dnat-tcp-2", "dnat-tcp-3", "dnat-tcp-4"]);

  const seen: Transaction[] = [];
  const run = fake.run.bind(fake);
  fake.run = (tx) => (seen.push(tx), run(tx));
  state.endpoints.set(serviceId(1), syntheticEndpoints(1, { ...OPTS, endpointsPerService: 4 }));
  const grow = await must(p.sync(input(state, [serviceId(1)])));
  assert.equal(grow.full, false);
  // First the move (elements only: traffic flows), then dnat-tcp-5 made ready.
  assert.ok(seen.length === 2, `two transactions, got ${seen.length}`);
  assert.ok(seen[0].ops.every((o) => o.obj.kind === "element"), "the change: elements only");
  assert.ok(seen[1].ops.every((o) => o.obj.kind !== "element"), "then readiness: no element");
  assert.deepEqual(await rules(), [
    "dnat-tcp-1",
    "dnat-tcp-2",
    "dnat-tcp-3",
    "dnat-tcp-4",
    "dnat-tcp-5",
  ]);
  assert.equal(
    canonicalBuckets(await settledDump(p, clock, fake, state)),
    canonicalBuckets(await freshDump(state)),
  );

  // A jump past the ready classes needs its class first: declarations, then elements.
  seen.length = 0;
  state.endpoints.set(serviceId(2), syntheticEndpoints(2, { ...OPTS, endpointsPerService: 9 }));
  await must(p.sync(input(state, [serviceId(2)])));
  assert.ok(seen[0].ops.every((o) => o.obj.kind !== "element"), "the class first");
  assert.ok(seen.at(-1)!.ops.every((o) => o.obj.kind === "element"), "its elements after");
  assert.equal(
    canonicalBuckets(await settledDump(p, clock, fake, state)),
    canonicalBuckets(await freshDump(state)),
  );
});
