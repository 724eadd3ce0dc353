import assert from "node:assert/strict";
import { FakeNftables } from "../ffi/nftables/fake.ts";
import { Transaction } from "../ffi/nftables/types.ts";
import {
  type MutableState,
  noStale,
  serviceId,
  syntheticConfig,
  syntheticEndpoints,
  syntheticService,
  syntheticState,
} from "../tests/bench/synthetic.ts";
import { defaultBuilder, Proxier, type ProxierInput, type SyncResult } from "./proxier.ts";

const OPTS = { services: 0, endpointsPerService: 1, nodePortEvery: 0, udpEvery: 0 };

class Clock {
  t = 1000;
  now = () => this.t;
}

function setup(_state: MutableState, fake = new FakeNftables("ip", "kube-proxy")) {
  const clock = new Clock();
  const p = new Proxier({ client: fake, config: syntheticConfig(), now: clock.now });
  p.markSynced("services");
  p.markSynced("endpointSlices");
  return { fake, clock, p };
}

function input(
  state: MutableState,
  changed: string[] = [],
  deleted: string[] = [],
): ProxierInput {
  return { state, changed: new Set(changed), deleted: new Set(deleted), stale: noStale() };
}

async function must(r: Promise<SyncResult | null>): Promise<SyncResult> {
  const res = await r;
  assert.ok(res !== null, "sync returned null (not ready?)");
  return res;
}

/** The dump a fresh proxier produces for `state` on an empty table. */
async function freshDump(state: MutableState): Promise<string> {
  const { fake, p } = setup(state);
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

Deno.test("proxier: nothing is programmed before Services and EndpointSlices synced", async () => {
  const state = syntheticState({ ...OPTS, services: 2 });
  const fake = new FakeNftables("ip", "kube-proxy");
  const p = new Proxier({ client: fake, config: syntheticConfig() });
  assert.equal(await p.sync(input(state)), null);
  p.markSynced("services");
  assert.equal(await p.sync(input(state)), null);
  const ready = p.waitReady();
  p.markSynced("endpointSlices");
  await ready;
  const r = await must(p.sync(input(state)));
  assert.equal(r.full, true);
  assert.ok(fake.state() !== null);
  assert.equal(p.programmed, state);
});

Deno.test("proxier: unchanged sync is an empty transaction; op counts stay small", async () => {
  const state = syntheticState({ ...OPTS, services: 20 });
  const { fake, p } = setup(state);
  const first = await must(p.sync(input(state)));
  assert.equal(first.full, true);
  const runs = fake.opCounts.length;

  const same = await must(p.sync(input(state)));
  assert.equal(same.full, false);
  assert.equal(same.ops, 0);
  assert.equal(fake.opCounts.length, runs, "no transaction at all for an unchanged sync");

  // A "changed" service whose fragment is identical costs nothing either.
  const noop = await must(p.sync(input(state, [serviceId(3)])));
  assert.equal(noop.ops, 0);

  // Add a service with one endpoint: chain + flush-free add + rules + elements.
  const id = addService(state, 100);
  const add = await must(p.sync(input(state, [id])));
  assert.ok(add.ops > 0 && add.ops <= 10, `add service+ep took ${add.ops} ops`);
  assert.equal(fake.dump(), await freshDump(state));

  // Add an endpoint to it.
  state.endpoints.set(id, syntheticEndpoints(100, { ...OPTS, endpointsPerService: 2 }));
  const addEp = await must(p.sync(input(state, [id])));
  assert.ok(addEp.ops > 0 && addEp.ops <= 8, `add endpoint took ${addEp.ops} ops`);
  assert.equal(fake.dump(), await freshDump(state));

  // Remove it again.
  state.endpoints.set(id, syntheticEndpoints(100, OPTS));
  const rmEp = await must(p.sync(input(state, [id])));
  assert.ok(rmEp.ops > 0 && rmEp.ops <= 8, `remove endpoint took ${rmEp.ops} ops`);
  assert.equal(fake.dump(), await freshDump(state));

  // Delete the service: flush its chain, drop its elements.
  state.services.delete(id);
  state.endpoints.delete(id);
  const del = await must(p.sync(input(state, [], [id])));
  assert.ok(del.ops > 0 && del.ops <= 6, `delete service took ${del.ops} ops`);
  console.log(
    `ops: add svc+ep ${add.ops}, add ep ${addEp.ops}, remove ep ${rmEp.ops}, delete svc ${del.ops}`,
  );
});

Deno.test("proxier: stale chains are flushed at once and deleted after the delay", async () => {
  const state = syntheticState({ ...OPTS, services: 3 });
  const { fake, clock, p } = setup(state);
  await must(p.sync(input(state)));
  const id = serviceId(1);
  const chainsBefore = await fake.listChains();
  state.services.delete(id);
  state.endpoints.delete(id);
  const del = await must(p.sync(input(state, [], [id])));
  assert.ok(del.followUpMs !== undefined && del.followUpMs <= 1000);
  const stale = [...p.written.staleChains.keys()];
  assert.ok(stale.length > 0);
  const st = fake.state()!;
  for (const c of stale) {
    assert.ok(st.chains.has(c), `${c} still exists right after the flush`);
    assert.equal(st.chains.get(c)!.rules.length, 0, `${c} is flushed`);
  }
  clock.t += 500;
  const early = await must(p.sync(input(state)));
  assert.equal(early.deletedChains, 0, "not deleted before the delay");
  clock.t += 600;
  const late = await must(p.sync(input(state)));
  assert.equal(late.deletedChains, stale.length);
  assert.equal(late.followUpMs, undefined);
  const after = await fake.listChains();
  assert.deepEqual(after, chainsBefore.filter((c) => !stale.includes(c)));
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: a stale chain re-used before deletion is just rewritten", async () => {
  const state = syntheticState({ ...OPTS, services: 3 });
  const { fake, clock, p } = setup(state);
  await must(p.sync(input(state)));
  const id = serviceId(1);
  const svc = state.services.get(id)!;
  const eps = state.endpoints.get(id)!;
  state.services.delete(id);
  state.endpoints.delete(id);
  await must(p.sync(input(state, [], [id])));
  assert.ok(p.written.staleChains.size > 0);
  state.services.set(id, svc);
  state.endpoints.set(id, eps);
  await must(p.sync(input(state, [id])));
  assert.equal(p.written.staleChains.size, 0);
  clock.t += 5000;
  const r = await must(p.sync(input(state)));
  assert.equal(r.deletedChains, 0);
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: a failed transaction makes the next sync full and keeps the stale report", async () => {
  const state = syntheticState({ ...OPTS, services: 5, udpEvery: 1 });
  const { fake, p } = setup(state);
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
  assert.deepEqual(r.stale.servicesWithNewEndpoints, [svc], "stale report survives the failure");
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: context change, node change and the periodic timer force full syncs", async () => {
  const state = syntheticState({ ...OPTS, services: 4 });
  const clock = new Clock();
  const fake = new FakeNftables("ip", "kube-proxy");
  const p = new Proxier({
    client: fake,
    config: syntheticConfig(),
    now: clock.now,
    fullSyncPeriodMs: 10_000,
  });
  p.markSynced("services");
  p.markSynced("endpointSlices");
  assert.equal((await must(p.sync(input(state)))).full, true);
  assert.equal((await must(p.sync(input(state)))).full, false);
  assert.equal((await must(p.sync({ ...input(state), nodeChanged: true }))).full, true);
  state.serviceCIDRs = ["198.18.0.0/15"];
  const ctx = await must(p.sync(input(state)));
  assert.equal(ctx.full, true, "ServiceCIDR change alters the context key");
  assert.ok(ctx.ops > 0 && ctx.ops < 10, `only the cluster-ips-check chain changes (${ctx.ops})`);
  clock.t += 10_000;
  const periodic = await must(p.sync(input(state)));
  assert.equal(periodic.full, true);
  assert.equal(periodic.ops, 0, "a no-change full sync writes nothing");
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: restart adoption reaches the desired state without flushing the table", async () => {
  const old = syntheticState({ ...OPTS, services: 10, endpointsPerService: 2 });
  const first = setup(old);
  await must(first.p.sync(input(old)));
  // The new process sees a different cluster: some services gone, some changed, some new.
  const now = syntheticState({ ...OPTS, services: 10, endpointsPerService: 2 });
  for (const i of [2, 3]) {
    now.services.delete(serviceId(i));
    now.endpoints.delete(serviceId(i));
  }
  now.endpoints.set(serviceId(5), syntheticEndpoints(5, { ...OPTS, endpointsPerService: 3 }, 7));
  addService(now, 40, 2);
  const second = setup(now, first.fake);
  const r = await must(second.p.sync(input(now)));
  assert.equal(r.full, true);
  const tx = first.fake.lastTransaction!;
  assert.ok(
    !tx.ops.some((o) => o.obj.kind === "table" && o.verb !== "add"),
    "the table is never flushed or deleted",
  );
  assert.ok(
    !tx.ops.some((o) =>
      o.obj.kind === "chain" && o.verb === "delete" && !o.obj.name.startsWith("filter-") &&
      !o.obj.name.startsWith("nat-")
    ),
    "no chain deleted in the adoption transaction (base chains are re-created in place)",
  );
  second.clock.t += 2000;
  await must(second.p.sync(input(now)));
  assert.equal(first.fake.dump(), await freshDump(now));
});

Deno.test("proxier: full sync repairs a deleted table, missing elements and foreign chains", async () => {
  const state = syntheticState({ ...OPTS, services: 6, nodePortEvery: 2 });
  const { fake, clock, p } = setup(state);
  await must(p.sync(input(state)));
  const want = fake.dump();

  // Tamper: drop an element, add a foreign chain and a foreign element.
  const [victim] = await fake.listElements("map", "service-ips");
  const tamper = new Transaction()
    .delete({ kind: "element", map: "service-ips", key: victim.key })
    .add({ kind: "chain", name: "intruder" })
    .add({ kind: "element", set: "cluster-ips", key: ["198.18.250.250"] });
  await fake.run(tamper);
  p.requestFullSync("test");
  const fix = await must(p.sync(input(state)));
  assert.equal(fix.full, true);
  assert.ok(fix.ops <= 6, `repair took ${fix.ops} ops`);
  clock.t += 2000;
  await must(p.sync(input(state)));
  assert.equal(fake.dump(), want);

  // The table vanishes (`nft delete table ip kube-proxy`): the next full sync restores it.
  await fake.run(new Transaction().delete({ kind: "table" }));
  const partial = await must(p.sync(input(state)));
  assert.equal(partial.ops, 0, "partial syncs do not notice");
  p.requestFullSync("periodic");
  const cold = await must(p.sync(input(state)));
  assert.equal(cold.full, true);
  assert.equal(fake.dump(), want);
});

for (const stream of [false, true]) {
  Deno.test(`proxier: chunked cold start (stream=${stream}); elements in one final tx`, async () => {
    const state = syntheticState({ ...OPTS, services: 30, endpointsPerService: 2 });
    const fake = new FakeNftables("ip", "kube-proxy");
    const seen: Transaction[] = [];
    const realRun = fake.run.bind(fake);
    fake.run = (tx: Transaction) => {
      seen.push(tx);
      return realRun(tx);
    };
    const p = new Proxier({
      client: fake,
      config: syntheticConfig(),
      chunkChains: 8,
      streamColdStart: stream,
    });
    p.markSynced("services");
    p.markSynced("endpointSlices");
    const r = await must(p.sync(input(state)));
    assert.ok(r.txs >= 4, `expected several chunks, got ${r.txs}`);
    for (const tx of seen.slice(0, -1)) {
      assert.ok(!tx.ops.some((o) => o.obj.kind === "element"), "no elements before the last tx");
    }
    assert.ok(seen.at(-1)!.ops.every((o) => o.obj.kind === "element" || o.obj.kind === "table"));
    assert.equal(fake.dump(), await freshDump(state));
    const again = await must(p.sync(input(state)));
    assert.equal(again.ops, 0, "the written state matches after a chunked cold start");
  });
}

Deno.test("proxier: a full sync steps aside once for a waiting change", async () => {
  const state = syntheticState({ ...OPTS, services: 40 });
  const fake = new FakeNftables("ip", "kube-proxy");
  let waiting = false;
  // A slow builder stands in for a big cluster: ~3 ms per service port.
  const slow = {
    ...defaultBuilder,
    buildServicePort: (...a: Parameters<typeof defaultBuilder.buildServicePort>) => {
      const end = performance.now() + 3;
      while (performance.now() < end) { /* busy */ }
      return defaultBuilder.buildServicePort(...a);
    },
  };
  const p = new Proxier({
    client: fake,
    config: syntheticConfig(),
    builder: slow,
    shouldYield: () => waiting,
  });
  p.markSynced("services");
  p.markSynced("endpointSlices");
  const cold = await must(p.sync(input(state)));
  assert.equal(cold.preempted, undefined, "a cold start never steps aside");
  p.requestFullSync("periodic");
  const id = serviceId(3);
  setTimeout(() => {
    state.endpoints.set(id, syntheticEndpoints(3, OPTS, 99));
    waiting = true;
  }, 10);
  const first = await must(p.sync(input(state)));
  assert.equal(first.preempted, true);
  assert.equal(first.ops, 0);
  waiting = false;
  const change = await must(p.sync(input(state, [id])));
  assert.equal(change.full, false);
  assert.equal(change.followUpMs, 0, "the full sync is asked for right after");
  assert.ok(change.ops > 0 && change.ops < 10);
  assert.equal(fake.dump(), await freshDump(state), "the change is programmed");
  waiting = true; // no second preemption in a row
  const full = await must(p.sync(input(state)));
  assert.equal(full.full, true);
  assert.equal(full.preempted, undefined);
  assert.equal(full.ops, 0);
});

Deno.test("proxier: a cold start failing midway is adopted by the next full sync", async () => {
  const state = syntheticState({ ...OPTS, services: 30, endpointsPerService: 2 });
  const fake = new FakeNftables("ip", "kube-proxy");
  const realRun = fake.run.bind(fake);
  let n = 0;
  fake.run = (tx: Transaction) =>
    n++ === 2 ? Promise.reject(new Error("chunk 3 fails")) : realRun(tx);
  const p = new Proxier({ client: fake, config: syntheticConfig(), chunkChains: 8 });
  p.markSynced("services");
  p.markSynced("endpointSlices");
  await assert.rejects(p.sync(input(state)), /chunk 3 fails/);
  assert.ok((await fake.listChains()).length > 0, "earlier chunks are in the kernel");
  assert.equal(
    (await fake.listElements("map", "service-ips")).length,
    0,
    "but nothing is reachable",
  );
  const r = await must(p.sync(input(state)));
  assert.equal(r.full, true);
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("proxier: adoption re-creates a base chain whose priority changed", async () => {
  const state = syntheticState({ ...OPTS, services: 3 });
  const fake = new FakeNftables("ip", "kube-proxy");
  // An older version left nat-output at another priority.
  await fake.run(
    new Transaction()
      .add({ kind: "table", comment: "rules for kube-proxy" })
      .add({ kind: "chain", name: "nat-output", type: "nat", hook: "output", priority: -90 })
      .add({ kind: "rule", chain: "nat-output", rule: "counter" }),
  );
  const { p } = setup(state, fake);
  await must(p.sync(input(state)));
  const chain = fake.state()!.chains.get("nat-output")!.chain;
  assert.equal(chain.priority, -100);
  assert.equal(fake.dump(), await freshDump(state));
});

Deno.test("build-context warnings (localhost NodePorts) are logged once per context", async () => {
  const logs: string[] = [];
  const client = new FakeNftables("ip", "kube-proxy");
  const config = { ...syntheticConfig(), nodePortAddresses: ["127.0.0.0/8"] };
  const p = new Proxier({ client, config, log: (_l, m) => logs.push(m) });
  p.markSynced("services");
  p.markSynced("endpointSlices");
  const state = syntheticState({ ...OPTS, services: 1 });
  await must(p.sync(input(state)));
  await must(p.sync(input(state)));
  const hits = logs.filter((m) => /localhost NodePorts are not supported/.test(m));
  assert.equal(hits.length, 1, logs.join("\n"));
});
