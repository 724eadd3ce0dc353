import assert from "node:assert/strict";
import { SyncEngine } from "./engine.ts";
import { Logger } from "./log.ts";
import { createMetrics } from "./metrics.ts";
import { ProxierHealthServer } from "./http/health.ts";
import { MemoryNftables } from "../ffi/nftables/memory/client.ts";
import { FakeConntrack } from "../ffi/conntrack/fake.ts";
import { ClusterState } from "../proxier/cluster_state.ts";
import { Proxier } from "../proxier/nftables/proxier.ts";
import type { EndpointSlice, V1Node, V1Service } from "../proxier/k8s_types.ts";
import type { ProxierConfig, ProxyState } from "../proxier/model.ts";
import type { IpFamily } from "../net/family.ts";
import { InlineConntrack } from "../conntrack/runner.ts";
import { type NftablesClient, Transaction } from "../ffi/nftables/types.ts";
import type { NftNotification } from "../ffi/nftables/netlink/notify.ts";

const NODE = "node-a";
const CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.0.0/16"] },
  nodePortAddresses: [],
};

const node: V1Node = {
  metadata: { name: NODE, labels: {} },
  status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
};

function service(name: string, ip: string, protocol = "UDP"): V1Service {
  return {
    metadata: { namespace: "default", name, resourceVersion: "1" },
    spec: { clusterIP: ip, clusterIPs: [ip], ports: [{ name: "p", protocol, port: 53 }] },
  };
}

function slice(name: string, svc: string, ips: string[], rv = "1"): EndpointSlice {
  return {
    metadata: {
      namespace: "default",
      name,
      resourceVersion: rv,
      labels: { "kubernetes.io/service-name": svc },
    },
    addressType: "IPv4",
    ports: [{ name: "p", protocol: "UDP", port: 5353 }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
  };
}

/** A quiet logger. */
function quiet(): Logger {
  return new Logger({ verbosity: 0, sink: { out: () => {}, err: () => {} } });
}

interface Rig {
  engine: SyncEngine;
  nft: MemoryNftables;
  ct: FakeConntrack;
  health: ProxierHealthServer;
  metrics: ReturnType<typeof createMetrics>;
}

function rig(
  opts: {
    client?: NftablesClient;
    adopted?: boolean;
    reconcile?: boolean;
    syncPeriodMs?: number;
    log?: Logger;
    monitored?: boolean;
    fullCheckPeriodMs?: number;
    afterLists?: () => void;
  } = {},
): Rig {
  const nft = new MemoryNftables("ip", "kube-proxy");
  const ct = new FakeConntrack();
  const metrics = createMetrics();
  const health = new ProxierHealthServer({ healthTimeoutMs: 60_000, metrics });
  const engine = new SyncEngine({
    state: new ClusterState({ nodeName: NODE, log: () => {} }),
    proxiers: { 4: new Proxier({ client: opts.client ?? nft, config: CFG, log: () => {} }) },
    minSyncPeriodMs: 0,
    syncPeriodMs: opts.syncPeriodMs ?? 60_000,
    monitored: opts.monitored,
    fullCheckPeriodMs: opts.fullCheckPeriodMs,
    log: opts.log ?? quiet(),
    metrics,
    health,
    conntrack: new InlineConntrack(() => ct),
    // Long enough that only the first sync and reconcileNow() run it.
    reconcilePeriodMs: opts.reconcile ? 3_600_000 : 0,
    adopted: opts.adopted,
    afterLists: opts.afterLists ?? (() => {}),
  });
  return { engine, nft, ct, health, metrics };
}

/** Waits until the engine has completed `n` syncs. */
async function syncs(e: SyncEngine, n: number): Promise<void> {
  const until = Date.now() + 5000;
  while (e.syncs < n) {
    if (Date.now() > until) throw new Error(`only ${e.syncs} syncs, wanted ${n}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Feeds the node, the dns Service and (optionally) its slice, then starts and waits for sync 1. */
async function startWithDns(engine: SyncEngine, endpoints?: string[]): Promise<void> {
  engine.recordNode(node);
  engine.recordService(null, service("dns", "198.19.0.53"));
  if (endpoints) engine.recordEndpointSlice(null, slice("dns-1", "dns", endpoints));
  engine.markSynced("services");
  engine.markSynced("endpointSlices");
  engine.start();
  await syncs(engine, 1);
}

/** A UDP flow from the client to the dns ClusterIP, answered by `replySrc`. */
function dnsFlow(sport: number, replySrc: string) {
  return {
    origSrc: "198.18.3.2",
    origSport: sport,
    origDst: "198.19.0.53",
    origDport: 53,
    replySrc,
    replySport: 5353,
  };
}

Deno.test("nothing is programmed before Services and EndpointSlices have synced", async () => {
  let settled = 0;
  const { engine, nft } = rig({ afterLists: () => settled++ });
  engine.recordNode(node);
  engine.recordService(null, service("dns", "198.19.0.53"));
  engine.start();
  engine.markSynced("services");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(await nft.list(), null, "no table before both informers synced");
  assert.equal(settled, 0, "the allocator is settled once both lists are in");
  engine.markSynced("endpointSlices");
  assert.equal(settled, 1);
  await syncs(engine, 1);
  engine.markSynced("services");
  assert.equal(settled, 1, "and only once");
  assert.ok(await nft.list(), "table programmed");
  // No endpoints yet: the ClusterIP is rejected through the no-endpoint map.
  const els = await nft.listElements("map", "no-endpoint-services");
  assert.ok(els.some((e) => e.key[0] === "198.19.0.53"), "service programmed");
  await engine.stop();
});

Deno.test("a change is a small partial sync; health and metrics follow the commit", async () => {
  const { engine, nft, health, metrics } = rig();
  await startWithDns(engine, ["198.18.1.2"]);
  assert.equal(engine.lastResults[4]?.full, true, "first sync is full");
  engine.recordEndpointSlice(
    slice("dns-1", "dns", ["198.18.1.2"]),
    slice("dns-1", "dns", ["198.18.1.2", "198.18.1.3"], "2"),
  );
  await syncs(engine, 2);
  const r = engine.lastResults[4]!;
  assert.equal(r.full, false, "an endpoint change is a partial sync");
  // Elements, plus the new class dnat-udp-2: its set, chain and rule, and the dispatch rewrite.
  assert.ok(nft.lastOpCount > 0 && nft.lastOpCount <= 16, `ops ${nft.lastOpCount}`);
  assert.equal(health.health().healthy, true);
  const text = await metrics.registry.metrics();
  assert.match(
    text,
    /kubeproxy_sync_partial_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} 1/,
  );
  assert.match(text, /kubeproxy_sync_proxy_rules_endpoint_changes_total 2/);
  await engine.stop();
});

Deno.test("stale UDP flows to a removed endpoint are deleted after the commit", async () => {
  const { engine, ct } = rig();
  await startWithDns(engine, ["198.18.1.2"]);
  // A client's flow DNATed to the endpoint that is about to go, and an unrelated one.
  ct.add(dnsFlow(4000, "198.18.1.2"));
  ct.add({ origSrc: "198.18.3.2", origSport: 4001, origDst: "198.18.9.9", origDport: 53 });
  engine.recordEndpointSlice(
    slice("dns-1", "dns", ["198.18.1.2"]),
    slice("dns-1", "dns", ["198.18.1.3"], "2"),
  );
  await syncs(engine, 2);
  const left: string[] = [];
  ct.dump(4, (e) => left.push(`${e.origDst}:${e.origDport}`));
  assert.deepEqual(left, ["198.18.9.9:53"], "only the stale flow went");
  await engine.stop();
});

Deno.test("after a restart the first sync does not flush flows of services that look new", async () => {
  const { engine, ct } = rig({ adopted: true });
  ct.add(dnsFlow(4000, "198.18.1.2"));
  await startWithDns(engine, ["198.18.1.2"]);
  let n = 0;
  ct.dump(4, () => n++);
  assert.equal(n, 1, "the healthy flow survives the adopting sync");
  await engine.stop();
});

Deno.test("a failed transaction is counted and the next sync is full", async () => {
  const nft = new MemoryNftables("ip", "kube-proxy");
  let failNext = false;
  const flaky: NftablesClient = {
    family: "ip",
    table: "kube-proxy",
    run: (tx: Transaction) => {
      if (failNext) {
        failNext = false;
        return Promise.reject(new Error("injected failure"));
      }
      return nft.run(tx);
    },
    check: (tx) => nft.check(tx),
    list: () => nft.list(),
    listChains: () => nft.listChains(),
    listSets: () => nft.listSets(),
    listChain: (n) => nft.listChain(n),
    getElement: (k, n, key) => nft.getElement(k, n, key),
    listElements: (k, n) => nft.listElements(k, n),
    close: () => {},
  };
  const { engine, metrics } = rig({ client: flaky });
  await startWithDns(engine);
  failNext = true;
  engine.recordService(null, service("dns2", "198.19.0.54"));
  // The failed attempt does not count as a completed sync; the retry does.
  await syncs(engine, 2);
  assert.equal(engine.lastResults[4]?.full, true, "the retry after a failure is full");
  const els = await nft.listElements("map", "no-endpoint-services");
  assert.ok(els.some((e) => e.key[0] === "198.19.0.54"), "the change made it after the retry");
  const text = await metrics.registry.metrics();
  assert.match(
    text,
    /kubeproxy_sync_proxy_rules_nftables_sync_failures_total\{ip_family="IPv4"\} 1/,
  );
  await engine.stop();
});

Deno.test("the reconciler deletes flows whose reply source is not an endpoint", async () => {
  const { engine, ct, metrics } = rig({ reconcile: true });
  await startWithDns(engine, ["198.18.1.3"]);
  ct.add(dnsFlow(4000, "198.18.1.2"));
  ct.add(dnsFlow(4002, "198.18.1.3"));
  await engine.reconcileNow();
  const left: number[] = [];
  ct.dump(4, (e) => left.push(e.origSport));
  assert.deepEqual(left, [4002], "the flow to the live endpoint stays");
  assert.match(
    await metrics.registry.metrics(),
    /kubeproxy_conntrack_reconciler_deleted_entries_total\{ip_family="IPv4"\} 1/,
  );
  await engine.stop();
});

Deno.test("the sync-period check restores what another program deleted, and says so", async () => {
  const lines: string[] = [];
  const log = new Logger({
    verbosity: 0,
    sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
  });
  const { engine, nft, metrics } = rig({ syncPeriodMs: 150, log });
  await startWithDns(engine, ["198.18.1.2"]);
  const before = nft.dump();
  // Another program: `nft delete table ip kube-proxy` (or `flush ruleset`).
  await nft.run(new Transaction().delete({ kind: "table" }));
  assert.equal(await nft.list(), null);
  const n = engine.syncs;
  await syncs(engine, n + 1); // the next --sync-period tick
  assert.equal(engine.lastResults[4]?.full, true, "the periodic sync compares everything");
  assert.equal(nft.dump(), before, "the ruleset is back as it was");
  assert.match(lines.join("\n"), /another program changed them\); restored.*ipFamily="IPv4"/);
  assert.match(
    await metrics.registry.metrics(),
    /kube_nft_proxy_nftables_repairs_total\{ip_family="IPv4"\} 1/,
  );
  // Nothing changed since: the next check finds nothing to repair.
  await syncs(engine, engine.syncs + 1);
  assert.equal(engine.lastResults[4]?.ops, 0);
  assert.match(await metrics.registry.metrics(), /repairs_total\{ip_family="IPv4"\} 1/);
  await engine.stop();
});

/** A notification as another program's batch produces it (ffi/nftables/netlink/notify.ts). */
function foreign(
  kind: NftNotification["kind"],
  name: string,
  table = "kube-proxy",
): NftNotification {
  return { kind, op: "del", portid: 4242, family: 2, table, name };
}

Deno.test("with notifications, the idle --sync-period tick reads nothing and /healthz stays fresh", async () => {
  const { engine, nft, health, metrics } = rig({ syncPeriodMs: 60, monitored: true });
  await startWithDns(engine, ["198.18.1.2"]);
  let lists = 0;
  const listElements = nft.listElements.bind(nft), listChains = nft.listChains.bind(nft);
  nft.listElements = (k, n) => (lists++, listElements(k, n));
  nft.listChains = () => (lists++, listChains());
  const stamp = async () =>
    /sync_proxy_rules_last_timestamp_seconds\{ip_family="IPv4"\} (\S+)/.exec(
      await metrics.registry.metrics(),
    )![1];
  const first = await stamp();
  await syncs(engine, engine.syncs + 3);
  assert.equal(engine.lastResults[4]?.full, false);
  assert.equal(engine.lastResults[4]?.ops, 0);
  assert.equal(lists, 0, "an idle tick listed the kernel");
  assert.notEqual(await stamp(), first, "the idle tick still stamps the sync time");
  assert.equal(health.health().healthy, true);
  await engine.stop();
});

Deno.test("a foreign change reported by notification is repaired and counted; other tables are not", async () => {
  const { engine, nft, metrics } = rig({ monitored: true });
  await startWithDns(engine, ["198.18.1.2"]);
  const before = nft.dump();
  await nft.run(
    new Transaction().delete({
      kind: "element",
      set: "frontends-dnat-udp-1",
      key: ["198.19.0.53", "udp", "53"],
    }),
  );
  const n = engine.syncs;
  engine.recordForeign([foreign("element", "frontends-dnat-udp-1", "someone-else")]);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(engine.syncs, n, "a change to another table starts no sync");
  engine.recordForeign([foreign("element", "frontends-dnat-udp-1")]);
  await syncs(engine, n + 1);
  assert.equal(nft.dump(), before);
  assert.match(await metrics.registry.metrics(), /repairs_total\{ip_family="IPv4"\} 1/);
  await engine.stop();
});

Deno.test("an overrun checks everything once; the engine's clock runs the periodic full check", async () => {
  const { engine } = rig({ syncPeriodMs: 40, monitored: true, fullCheckPeriodMs: 400 });
  await startWithDns(engine, ["198.18.1.2"]);
  engine.recordOverrun();
  await syncs(engine, engine.syncs + 1);
  assert.equal(engine.lastResults[4]?.full, true, "the overrun's check");
  await syncs(engine, engine.syncs + 1);
  assert.equal(engine.lastResults[4]?.full, false);
  const fulls: boolean[] = [];
  const until = Date.now() + 1500;
  while (!fulls.includes(true) && Date.now() < until) {
    await syncs(engine, engine.syncs + 1);
    fulls.push(engine.lastResults[4]!.full);
  }
  assert.ok(fulls.includes(true), "no periodic full check within --full-sync-period");
  await engine.stop();
});

Deno.test("engine feeds the conntrack runner's reconcile index before each reconcile: every port first, then the changed ones", async () => {
  const ct = new FakeConntrack();
  const fed: { family: number; ids: string[]; services: number }[] = [];
  const runner = new InlineConntrack(() => ct);
  const withIndex = Object.assign(runner, {
    updateIndex(family: IpFamily, state: ProxyState, ids: Iterable<string>) {
      fed.push({ family, ids: [...ids].sort(), services: state.services.size });
    },
  });
  const mk = (reconcilePeriodMs: number) =>
    new SyncEngine({
      state: new ClusterState({ nodeName: NODE, log: () => {} }),
      proxiers: {
        4: new Proxier({
          client: new MemoryNftables("ip", "kube-proxy"),
          config: CFG,
          log: () => {},
        }),
      },
      minSyncPeriodMs: 0,
      syncPeriodMs: 60_000,
      log: quiet(),
      conntrack: withIndex,
      reconcilePeriodMs,
      trimMemory: () => trims++,
    });
  let trims = 0;
  const engine = mk(3_600_000);
  try {
    engine.recordNode(node);
    engine.recordService(null, service("dns", "198.19.0.53"));
    engine.recordService(null, service("web", "198.19.0.80", "TCP"));
    engine.recordEndpointSlice(null, slice("dns-1", "dns", ["198.18.1.1"]));
    engine.markSynced("services");
    engine.markSynced("endpointSlices");
    await engine.syncNow();
    assert.equal(fed.length, 0, "the first reconcile waits for a later turn (the memory trim)");
    // Then it runs, fed every port first, and native memory is trimmed once after it.
    for (let i = 0; i < 50 && trims === 0; i++) await new Promise((r) => setTimeout(r, 1));
    assert.deepEqual(fed, [{ family: 4, ids: ["default/dns:p", "default/web:p"], services: 2 }]);
    assert.equal(trims, 1);
    engine.recordEndpointSlice(
      slice("dns-1", "dns", ["198.18.1.1"]),
      slice("dns-1", "dns", ["198.18.1.2"], "2"),
    );
    await engine.syncNow();
    engine.recordService(null, service("db", "198.19.0.90", "TCP"));
    await engine.syncNow();
    assert.equal(fed.length, 1, "fed just before a reconcile, not per commit");
    // Two commits, one message: the ports either changed, with the newest state.
    await engine.reconcileNow();
    assert.deepEqual(fed[1], { family: 4, ids: ["default/db:p", "default/dns:p"], services: 3 });
    await engine.reconcileNow();
    assert.equal(fed.length, 2, "nothing changed since the last reconcile: nothing fed");
    assert.equal(trims, 1, "trimmed after the first reconcile only");
  } finally {
    await engine.stop();
  }
  // No reconcile: nothing is fed (no Worker thread started for it).
  fed.length = 0;
  const off = mk(0);
  try {
    off.recordNode(node);
    off.recordService(null, service("dns", "198.19.0.53"));
    off.markSynced("services");
    off.markSynced("endpointSlices");
    await off.syncNow();
    assert.equal(off.syncs, 1);
    assert.deepEqual(fed, []);
  } finally {
    await off.stop();
  }
});
