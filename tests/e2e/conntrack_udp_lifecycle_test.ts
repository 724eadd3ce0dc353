/**
 * Real-kernel tests of the stale UDP flows kube-proxy 1.37 and 1.38 clear: when a Service
 * scales to zero serving endpoints (upstream #139629), and for every frontend of a deleted
 * UDP Service (ClusterIP, externalIPs, NodePort; upstream #141371). A client sending from one
 * fixed source port refreshes its flow every 200 ms, far inside the 30 s UDP timeout, so a
 * flow that disappears was deleted, not timed out; a second Service's flow must survive.
 *
 * Topology: tests/topology.ts (client -> node router -> pod A = "dns" endpoint, pod B =
 * "other" endpoint). The engine (fixtures/engine_driver.ts) runs in the node namespace with
 * either the post-sync cleanup or the reconciler alone, so each path is shown on its own.
 *
 * @module
 */
import assert from "node:assert/strict";
import { e2eTest } from "../netns.ts";
import { NODE4, NODE6, POD_CIDRS, Topology } from "../topology.ts";
import { Engine, type Flow, flows, type Json, PING_MS, Pinger } from "./fixtures/engine_client.ts";

const NODE_NAME = "knp-e2e-node";
const UDP_PORT = 5353;
const TCP_PORT = 8080;
const DNS_IP = "198.19.0.53";
const OTHER_IP = "198.19.0.54";
const EXTERNAL_IP = "198.18.200.53";
const NODE_PORT = 30053;
const RECONCILE_MS = 1000;
/** How long after the sync a stale flow may still exist (a post-sync cleanup is immediate). */
const BOUND_MS = 2500;

function nodeObject(): Json {
  return {
    kind: "Node",
    metadata: { name: NODE_NAME },
    spec: { podCIDRs: POD_CIDRS },
    status: {
      addresses: [{ type: "InternalIP", address: NODE4 }, { type: "InternalIP", address: NODE6 }],
    },
  };
}

/** A UDP Service `name` on port 53; `dns` also has an externalIP and a NodePort. */
function service(name: "dns" | "other"): Json {
  const ip = name === "dns" ? DNS_IP : OTHER_IP;
  return {
    kind: "Service",
    metadata: { namespace: "e2e", name, resourceVersion: "1" },
    spec: {
      type: name === "dns" ? "NodePort" : "ClusterIP",
      clusterIP: ip,
      clusterIPs: [ip],
      ipFamilies: ["IPv4"],
      ...(name === "dns" ? { externalIPs: [EXTERNAL_IP] } : {}),
      ports: [{
        name: "dns",
        protocol: "UDP",
        port: 53,
        targetPort: UDP_PORT,
        ...(name === "dns" ? { nodePort: NODE_PORT } : {}),
      }],
    },
  };
}

let version = 0;

/** The Service's one slice with `ips` ready. */
function slice(svc: string, ips: string[]): Json {
  return {
    kind: "EndpointSlice",
    metadata: {
      namespace: "e2e",
      name: `${svc}-1`,
      labels: { "kubernetes.io/service-name": svc },
      resourceVersion: String(++version),
    },
    addressType: "IPv4",
    endpoints: ips.map((ip) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: NODE_NAME,
    })),
    ports: [{ name: "dns", protocol: "UDP", port: UDP_PORT }],
  };
}

/** The clients: one per frontend of "dns", one to "other". */
const CLIENTS = {
  cluster: { host: DNS_IP, port: 53, sport: 41001 },
  external: { host: EXTERNAL_IP, port: 53, sport: 41002 },
  nodePort: { host: NODE4, port: NODE_PORT, sport: 41003 },
  other: { host: OTHER_IP, port: 53, sport: 41004 },
};
type ClientName = keyof typeof CLIENTS;

/** Two pods with UDP echoes A and B, an engine with `flags`, both Services served. */
async function setup(topo: Topology, flags: string[]): Promise<Engine> {
  await topo.startEcho(0, "A", TCP_PORT, UDP_PORT);
  await topo.startEcho(1, "B", TCP_PORT, UDP_PORT);
  const engine = await Engine.start(topo, ["--families=4", ...flags]);
  try {
    await engine.apply(nodeObject());
    await engine.apply(service("dns"));
    await engine.apply(service("other"));
    await engine.apply(slice("dns", [topo.podIPv4(0)]));
    await engine.apply(slice("other", [topo.podIPv4(1)]));
    await engine.send({ op: "synced" });
    await engine.send({ op: "wait-sync" });
    return engine;
  } catch (err) {
    await engine.stop().catch(() => {});
    throw err;
  }
}

/** Starts the clients and waits until each has its DNATed flow. */
async function startClients(topo: Topology, names: ClientName[]) {
  const pingers = new Map<ClientName, Pinger>();
  for (const n of names) {
    const c = CLIENTS[n];
    pingers.set(n, await Pinger.start(topo.client, c.host, c.port, c.sport, 60));
  }
  for (const n of names) await pingers.get(n)!.waitReplies(n === "other" ? "B" : "A", 3, 5000);
  const before = await flows(topo, 4);
  for (const n of names) {
    const want = n === "other" ? topo.podIPv4(1) : topo.podIPv4(0);
    assert.equal(before.get(CLIENTS[n].sport)?.replySrc, want, `${n}'s flow is DNATed to ${want}`);
  }
  return { pingers, before };
}

/** Waits until none of `gone` has a flow DNATed to `ip` left; returns when that was seen. */
async function waitGone(
  topo: Topology,
  gone: ClientName[],
  ip: string,
  ms: number,
): Promise<{ t: number; now: Map<number, Flow> }> {
  const end = Date.now() + ms;
  for (;;) {
    const now = await flows(topo, 4);
    const left = gone.filter((n) => now.get(CLIENTS[n].sport)?.replySrc === ip);
    if (left.length === 0) return { t: Date.now(), now };
    if (Date.now() > end) {
      throw new Error(`flows of ${left.join(", ")} still DNATed to ${ip} after ${ms} ms`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The survivor kept its very flow and kept hearing B. */
async function assertOtherUntouched(
  pinger: Pinger,
  before: Map<number, Flow>,
  now: Map<number, Flow>,
  since: number,
) {
  const sport = CLIENTS.other.sport;
  assert.deepEqual(now.get(sport), before.get(sport), "the other Service's flow is the same flow");
  await pinger.waitReplies("B", 3, 3000, since);
  const heard = pinger.replies(since);
  assert.ok(heard.every((r) => r.from === "B"), JSON.stringify(heard));
}

/** The clients of `gone` kept sending after their flows went, and never reached A again. */
async function assertStayedGone(
  topo: Topology,
  pingers: Map<ClientName, Pinger>,
  gone: ClientName[],
  t: number,
) {
  await new Promise((r) => setTimeout(r, 4 * PING_MS));
  const now = await flows(topo, 4);
  for (const n of gone) {
    const p = pingers.get(n)!;
    // Each send interval ends in a reply or a timeout line: the client kept the flow busy.
    const active = p.lines.filter((l) => "t" in l && l.t > t).length;
    assert.ok(active >= 2, `${n} kept sending after its flow went (${active} intervals)`);
    const late = p.replies(t + PING_MS).filter((r) => r.from === "A");
    assert.deepEqual(late, [], `${n} no longer reaches A`);
    assert.notEqual(now.get(CLIENTS[n].sport)?.replySrc, topo.podIPv4(0), `${n}: not back on A`);
  }
}

async function stopAll(pingers: Map<ClientName, Pinger>) {
  for (const p of pingers.values()) await p.stop();
}

for (const path of ["post-sync", "reconcile"] as const) {
  const flags = path === "post-sync" ? ["--post-sync"] : [`--reconcile=${RECONCILE_MS}`];
  e2eTest(
    `UDP scaled to zero (1.37): the ${path} path deletes the flows, others stay`,
    async () => {
      const topo = await Topology.create({ pods: 2, tag: "ctz" });
      try {
        await topo.node.exec(["sysctl", "-q", "-w", "net.netfilter.nf_conntrack_timestamp=1"]);
        const engine = await setup(topo, flags);
        const names: ClientName[] = ["cluster", "nodePort", "other"];
        const { pingers, before } = await startClients(topo, names);
        try {
          const tChange = Date.now();
          await engine.apply(slice("dns", []));
          const synced = (await engine.send({ op: "wait-sync" })).t as number;
          const { t, now } = await waitGone(
            topo,
            ["cluster", "nodePort"],
            topo.podIPv4(0),
            BOUND_MS,
          );
          await assertStayedGone(topo, pingers, ["cluster", "nodePort"], t);
          if (path === "post-sync") {
            const sync = engine.since("sync", tChange).find((e) => {
              const r = (e.results as Record<string, { stale: { deleted: string[] } }>)["4"];
              return r?.stale.deleted.some((d) => d.startsWith("e2e/dns:dns="));
            });
            assert.ok(sync, "the sync reported dns's endpoint as removed");
            const dels = engine.since("ct-delete", tChange).flatMap((e) => e.entries as string[]);
            for (const n of ["cluster", "nodePort"] as const) {
              assert.ok(dels.some((x) => x.includes(`:${CLIENTS[n].sport}->`)), `${n}: ${dels}`);
            }
            assert.equal(engine.since("reconcile", 0).length, 0, "reconciler disabled");
          } else {
            const recs = engine.since("reconcile", tChange).filter((r) =>
              (r.deleted as number) > 0
            );
            assert.ok(recs.length > 0, "a reconcile deleted them");
            const reasons = recs[0].byReason as Record<string, number>;
            assert.equal(reasons["frontend-no-endpoints"], 1, JSON.stringify(reasons));
            assert.equal(reasons["nodeport-no-endpoints"], 1, JSON.stringify(reasons));
            assert.equal(engine.since("ct-delete", 0).length, 0, "post-sync disabled");
          }
          await assertOtherUntouched(pingers.get("other")!, before, now, tChange);
          console.log(`    ${path}: stale flows gone ${t - synced} ms after the sync`);
        } finally {
          await stopAll(pingers);
          await engine.stop();
        }
      } finally {
        await topo.close();
      }
    },
  );
}

e2eTest("UDP Service deleted (1.38): every flow to its frontends goes, others stay", async () => {
  const topo = await Topology.create({ pods: 2, tag: "ctd" });
  try {
    await topo.node.exec(["sysctl", "-q", "-w", "net.netfilter.nf_conntrack_timestamp=1"]);
    const engine = await setup(topo, ["--post-sync"]);
    const names: ClientName[] = ["cluster", "external", "nodePort", "other"];
    const { pingers, before } = await startClients(topo, names);
    try {
      // A flow to the ClusterIP DNATed to an address that was never a serving endpoint of
      // this sync (say, one removed while the agent was down): only "every flow to the
      // frontend" covers it, not "flows to the endpoints that just went".
      await topo.node.exec([
        "conntrack",
        "-I",
        "-p",
        "udp",
        "-s",
        "198.18.3.2",
        "-d",
        DNS_IP,
        "--sport",
        "41099",
        "--dport",
        "53",
        "--reply-src",
        "198.18.1.99",
        "--reply-dst",
        "198.18.3.2",
        "--reply-port-src",
        String(UDP_PORT),
        "--reply-port-dst",
        "41099",
        "-t",
        "120",
      ]);
      assert.equal((await flows(topo, 4)).get(41099)?.replySrc, "198.18.1.99");
      const tChange = Date.now();
      await engine.send({ op: "delete", obj: service("dns") });
      await engine.send({ op: "delete", obj: slice("dns", []) });
      const synced = (await engine.send({ op: "wait-sync" })).t as number;
      const gone: ClientName[] = ["cluster", "external", "nodePort"];
      const { t, now } = await waitGone(topo, gone, topo.podIPv4(0), BOUND_MS);
      assert.equal(now.get(41099), undefined, "the flow to a never-seen endpoint went too");
      const sync = engine.since("sync", tChange).find((e) => {
        const r = (e.results as Record<string, { stale: { deletedServices: string[] } }>)["4"];
        return r?.stale.deletedServices.includes("e2e/dns:dns");
      });
      assert.ok(sync, `the sync reported e2e/dns:dns deleted: ${JSON.stringify(engine.events)}`);
      const dels = engine.since("ct-delete", tChange).flatMap((e) => e.entries as string[]);
      for (const sp of [41001, 41002, 41003, 41099]) {
        assert.ok(dels.some((x) => x.includes(`:${sp}->`)), `flow from ${sp} deleted: ${dels}`);
      }
      // Nothing of "other" was touched, and its client never noticed.
      assert.ok(!dels.some((x) => x.includes(`:${CLIENTS.other.sport}->`)));
      await assertOtherUntouched(pingers.get("other")!, before, now, tChange);
      await assertStayedGone(topo, pingers, gone, t);
      console.log(`    deleted Service: its flows gone ${t - synced} ms after the sync`);
    } finally {
      await stopAll(pingers);
      await engine.stop();
    }
  } finally {
    await topo.close();
  }
});
