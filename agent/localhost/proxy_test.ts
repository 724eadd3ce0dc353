import assert from "node:assert/strict";
import { Logger } from "../log.ts";
import { createMetrics } from "../metrics.ts";
import { LocalhostProxy } from "./proxy.ts";
import { localhostFamilies, loopbackSelection } from "./selection.ts";
import { listenerTarget } from "./targets.ts";
import { FakeConn, FakeNet, settle } from "./testing.ts";
import type { FamilySync } from "../../proxier/cluster_state.ts";
import type { EndpointInfo, NodeInfo, ServicePortInfo } from "../../proxier/model.ts";
import { endpoint, servicePort } from "../../proxier/model_testing.ts";
import type { IpFamily } from "../../net/family.ts";

const node: NodeInfo = {
  name: "n1",
  labels: { "topology.kubernetes.io/zone": "z1" },
  ips: ["198.18.0.1"],
  podCIDRs: [],
};

function quiet(lines: string[] = []): Logger {
  return new Logger({
    verbosity: 4,
    sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
  });
}

/** A cluster state the tests edit, and the FamilySync the engine would hand over. */
class World {
  services = new Map<string, ServicePortInfo>();
  endpoints = new Map<string, readonly EndpointInfo[]>();
  sync(family: IpFamily, changed: string[], deleted: string[] = []): FamilySync {
    return {
      state: { family, services: this.services, endpoints: this.endpoints, node, serviceCIDRs: [] },
      changed: new Set(changed),
      deleted: new Set(deleted),
      stale: { servicesWithNewEndpoints: [], deletedEndpoints: [] },
    };
  }
}

function setup(
  families: IpFamily[] = [4],
  opts: { random?: () => number; now?: () => number } = {},
) {
  const net = new FakeNet();
  const metrics = createMetrics();
  const lines: string[] = [];
  const proxy = new LocalhostProxy({
    families,
    log: quiet(lines),
    metrics,
    net,
    picker: { now: opts.now ?? (() => 0), random: opts.random ?? (() => 0) },
    schedule: () => {}, // the tests call reconcile() themselves
  });
  return { net, metrics, proxy, lines, world: new World() };
}

async function gauge(m: ReturnType<typeof createMetrics>, name: string, fam: string) {
  const v = (await m.registry.getSingleMetric(name)!.get()).values;
  return v.find((x) => x.labels.ip_family === fam)?.value;
}

Deno.test("selection: localhost or a loopback CIDR turns the proxy on; all, 0/0 and the gate off do not", () => {
  assert.deepEqual(loopbackSelection(["localhost"]), { ipv4: true, ipv6: true });
  assert.deepEqual(loopbackSelection(["127.0.0.1/32"]), { ipv4: true, ipv6: false });
  assert.deepEqual(loopbackSelection(["::1/128", "198.18.0.0/15"]), { ipv4: false, ipv6: true });
  assert.deepEqual(loopbackSelection(["0.0.0.0/0", "::/0"]), { ipv4: false, ipv6: false });
  assert.deepEqual(loopbackSelection(["all"]), { ipv4: false, ipv6: false });
  assert.deepEqual(loopbackSelection([]), { ipv4: false, ipv6: false });
  assert.deepEqual(loopbackSelection(["primary", "localhost"]), { ipv4: true, ipv6: true });
  assert.deepEqual(loopbackSelection(["127.0.0.2/32"]), { ipv4: false, ipv6: false });
  assert.deepEqual(loopbackSelection(["bogus"]), { ipv4: false, ipv6: false });
  const both = { ipv4: true, ipv6: true };
  assert.deepEqual(localhostFamilies(both, true, [4, 6]), [4, 6]);
  assert.deepEqual(localhostFamilies(both, true, [6]), [6]);
  assert.deepEqual(localhostFamilies(both, false, [4, 6]), []);
});

Deno.test("targets: TCP NodePorts only; Cluster set with topology hints; eTP=Local its local endpoints", () => {
  const np = servicePort("ns/a:http", { nodePort: 30080, clusterIP: "198.19.0.1" });
  const eps = [
    endpoint("198.18.1.1", 80, { isLocal: true, zoneHints: ["z1"] }),
    endpoint("198.18.1.2", 80, { zoneHints: ["z2"] }),
  ];
  assert.deepEqual(listenerTarget(np, eps, node)?.backends, [{ ip: "198.18.1.1", port: 80 }]);
  assert.equal(listenerTarget({ ...np, protocol: "UDP" }, eps, node), undefined);
  assert.equal(listenerTarget({ ...np, nodePort: 0 }, eps, node), undefined);
  assert.equal(listenerTarget(np, [], node), undefined);
  const local = { ...np, externalPolicyLocal: true };
  assert.deepEqual(listenerTarget(local, eps, node)?.backends, [{ ip: "198.18.1.1", port: 80 }]);
  assert.equal(listenerTarget(local, [eps[1]], node), undefined, "no local endpoint: no listener");
  // Terminating fallback as the rules have it.
  const term = [endpoint("198.18.1.3", 80, { ready: false, serving: true, terminating: true })];
  assert.deepEqual(listenerTarget(np, term, node)?.backends, [{ ip: "198.18.1.3", port: 80 }]);
  assert.equal(listenerTarget({ ...np, stickyMaxAgeSeconds: 30 }, eps, node)?.affinitySeconds, 30);
});

Deno.test("listeners follow Services and endpoints, per family, and the gauge counts them", async () => {
  const { net, proxy, world, metrics } = setup([4, 6]);
  world.services.set("a", servicePort("ns/a", { nodePort: 30001, clusterIP: "198.19.0.1" }));
  world.endpoints.set("a", [endpoint("198.18.1.1", 80)]);
  world.services.set("u", servicePort("ns/u", { nodePort: 30002, protocol: "UDP" }));
  world.endpoints.set("u", [endpoint("198.18.1.1", 53)]);
  proxy.followSync(4, world.sync(4, []), true);
  proxy.followSync(6, world.sync(6, []), true);
  proxy.reconcile();
  assert.deepEqual(proxy.listening(4), [30001]);
  assert.deepEqual(proxy.listening(6), [30001]);
  assert.ok(net.open("127.0.0.1", 30001));
  assert.ok(net.open("::1", 30001));
  assert.equal(await gauge(metrics, "kubeproxy_nftables_localhost_nodeport_listeners", "IPv4"), 1);

  // An open connection, then the endpoint changes: the listener stays, the connection stays.
  const client = net.open("127.0.0.1", 30001)!.connect();
  await settle();
  assert.equal(net.dials.at(-1)!.backend.ip, "198.18.1.1");
  world.endpoints.set("a", [endpoint("198.18.1.9", 80)]);
  proxy.followSync(4, world.sync(4, ["a"]), false);
  proxy.reconcile();
  assert.ok(!client.closed);
  assert.equal(proxy.listener(4, 30001)!.connections, 1);
  net.open("127.0.0.1", 30001)!.connect();
  await settle();
  assert.equal(net.dials.at(-1)!.backend.ip, "198.18.1.9", "new connections use the new set");

  // NodePort moves: old listener closed, new one bound.
  world.services.set("a", servicePort("ns/a", { nodePort: 30011 }));
  proxy.followSync(4, world.sync(4, ["a"]), false);
  proxy.reconcile();
  assert.deepEqual(proxy.listening(4), [30011]);
  assert.equal(net.open("127.0.0.1", 30001), undefined);
  assert.ok(!client.closed, "closing a listener leaves its connections alone");

  // Endpoints gone: no listener. Service deleted: none either.
  world.endpoints.delete("a");
  proxy.followSync(4, world.sync(4, ["a"]), false);
  proxy.reconcile();
  assert.deepEqual(proxy.listening(4), []);
  world.services.delete("a");
  proxy.followSync(6, world.sync(6, [], ["a"]), false);
  proxy.reconcile();
  assert.deepEqual(proxy.listening(6), []);
  assert.equal(await gauge(metrics, "kubeproxy_nftables_localhost_nodeport_listeners", "IPv6"), 0);
  proxy.close();
  assert.ok(client.closed, "close() drops the relayed connections");
});

Deno.test("eTP=Local: no listener without a local endpoint, one as soon as there is", () => {
  const { proxy, world } = setup();
  world.services.set("l", servicePort("ns/l", { nodePort: 30003, externalPolicyLocal: true }));
  world.endpoints.set("l", [endpoint("198.18.1.2", 80)]);
  proxy.followSync(4, world.sync(4, ["l"]), false);
  proxy.reconcile();
  assert.deepEqual(proxy.listening(4), []);
  world.endpoints.set("l", [
    endpoint("198.18.1.2", 80),
    endpoint("198.18.1.3", 80, { isLocal: true }),
  ]);
  proxy.followSync(4, world.sync(4, ["l"]), false);
  proxy.reconcile();
  assert.deepEqual(proxy.listening(4), [30003]);
  assert.deepEqual(proxy.listener(4, 30003)!.picker.backends, [{ ip: "198.18.1.3", port: 80 }]);
});

Deno.test("ClientIP affinity pins loopback clients to one endpoint until the pin idles out", async () => {
  let now = 0;
  let r = 0;
  const { net, proxy, world } = setup([4], { now: () => now, random: () => r });
  world.services.set("s", servicePort("ns/s", { nodePort: 30004, stickyMaxAgeSeconds: 10 }));
  world.endpoints.set("s", [endpoint("198.18.1.1", 80), endpoint("198.18.1.2", 80)]);
  proxy.followSync(4, world.sync(4, ["s"]), false);
  proxy.reconcile();
  const ln = net.open("127.0.0.1", 30004)!;
  const picks: string[] = [];
  for (const [t, rand] of [[0, 0], [5000, 0.9], [14000, 0.9], [24001, 0.9]]) {
    now = t;
    r = rand;
    ln.connect();
    await settle();
    picks.push(net.dials.at(-1)!.backend.ip);
  }
  // Within 10 s of the last use the pin holds (a sliding window); after 10 s idle it is re-picked.
  assert.deepEqual(picks, ["198.18.1.1", "198.18.1.1", "198.18.1.1", "198.18.1.2"]);
  // The pinned endpoint leaves: a new pick at once.
  world.endpoints.set("s", [endpoint("198.18.1.3", 80)]);
  proxy.followSync(4, world.sync(4, ["s"]), false);
  proxy.reconcile();
  ln.connect();
  await settle();
  assert.equal(net.dials.at(-1)!.backend.ip, "198.18.1.3");
});

Deno.test("a port in use: a clear line, the failure metric, and a retry after the next sync", async () => {
  const { net, proxy, world, metrics, lines } = setup();
  net.busy.add(30005);
  world.services.set("b", servicePort("ns/b", { nodePort: 30005 }));
  world.endpoints.set("b", [endpoint("198.18.1.1", 80)]);
  world.services.set("c", servicePort("ns/c", { nodePort: 30006 }));
  world.endpoints.set("c", [endpoint("198.18.1.1", 80)]);
  proxy.followSync(4, world.sync(4, ["b", "c"]), false);
  proxy.reconcile();
  assert.deepEqual(proxy.listening(4), [30006], "the other Service still gets its listener");
  const failures = "kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total";
  assert.equal(await gauge(metrics, failures, "IPv4"), 1);
  const line = lines.find((l) => l.includes("Failed to create localhost nodeport proxy"));
  assert.ok(line?.includes("127.0.0.1:30005") && line.includes("AddrInUse"), String(line));
  net.busy.delete(30005);
  proxy.followSync(4, world.sync(4, []), false); // an unrelated sync
  proxy.reconcile();
  assert.deepEqual(proxy.listening(4), [30005, 30006]);
});

Deno.test("followSync only records: the reconcile runs in a later task, and never awaits a client", async () => {
  const net = new FakeNet();
  const queued: (() => void)[] = [];
  const proxy = new LocalhostProxy({
    families: [4],
    log: quiet(),
    net,
    picker: { now: () => 0, random: () => 0 },
    schedule: (fn) => queued.push(fn),
  });
  const world = new World();
  world.services.set("s", servicePort("ns/s", { nodePort: 30007 }));
  world.endpoints.set("s", [endpoint("198.18.1.1", 80)]);
  proxy.followSync(4, world.sync(4, ["s"]), false);
  proxy.followSync(4, world.sync(4, ["s"]), false);
  assert.deepEqual(proxy.listening(4), [], "nothing bound on the sync's path");
  assert.equal(queued.length, 1, "one reconcile queued for both syncs");
  queued.shift()!();
  assert.deepEqual(proxy.listening(4), [30007]);
  // A client whose reads never drain: the relay waits on it, the next reconcile does not.
  const stuck = new FakeConn();
  stuck.gate = new Promise(() => {});
  net.open("127.0.0.1", 30007)!.connect(stuck);
  await settle();
  net.dials.at(-1)!.conn.feed(new TextEncoder().encode("response"));
  world.endpoints.set("s", [endpoint("198.18.1.2", 80)]);
  proxy.followSync(4, world.sync(4, ["s"]), false);
  queued.shift()!();
  assert.deepEqual(proxy.listener(4, 30007)!.picker.backends, [{ ip: "198.18.1.2", port: 80 }]);
  proxy.close();
});

Deno.test("an accept error (EMFILE) is logged and the listener keeps accepting", async () => {
  const { net, proxy, world, lines } = setup();
  world.services.set("s", servicePort("ns/s", { nodePort: 30009 }));
  world.endpoints.set("s", [endpoint("198.18.1.1", 80)]);
  proxy.followSync(4, world.sync(4, ["s"]), false);
  proxy.reconcile();
  const ln = net.open("127.0.0.1", 30009)!;
  await settle();
  ln.failNext(new Error("Too many open files (os error 24)"));
  await new Promise((r) => setTimeout(r, 150));
  ln.connect();
  await settle();
  assert.equal(net.dials.length, 1, "accepted after the failure");
  assert.ok(lines.some((l) => l.includes("Accept failed") && l.includes("os error 24")));
  proxy.close();
});

Deno.test("an idle proxy (no family: gate off or no loopback) binds nothing", () => {
  const { net, proxy, world } = setup([]);
  world.services.set("s", servicePort("ns/s", { nodePort: 30008 }));
  world.endpoints.set("s", [endpoint("198.18.1.1", 80)]);
  proxy.followSync(4, world.sync(4, ["s"]), true);
  proxy.reconcile();
  assert.equal(net.listeners.size, 0);
});
