/**
 * Real-traffic tests of duplicate endpoint addresses across a Service's EndpointSlices
 * (kubernetes#135266, fixed upstream in 1.36 by PR #135593; proxier/endpoint_dedup.ts):
 *
 * - a Pod IP reused while the old Pod is still terminating: the ghost (old Pod, terminating)
 *   sits in one slice, the live Pod with the same IP in another, and the ghost's slice is
 *   written last. Traffic must reach the live endpoint, and the Service must not be treated
 *   as terminating-only (which would spread traffic over its terminating endpoints);
 * - one Pod moving between slices as it starts terminating: the newer slice's conditions win
 *   (the Pod stops getting new connections) before the old slice drops its copy.
 *
 * Topology: tests/topology.ts (client -> node router -> pods A = 198.18.1.2, B = 198.18.1.3,
 * TCP echoes answering with their label). The engine runs in the node namespace
 * (fixtures/engine_driver.ts), fed the objects directly.
 *
 * @module
 */
import assert from "node:assert/strict";
import { e2eTest } from "../netns.ts";
import { NODE4, NODE6, POD_CIDRS, replies, Topology } from "../topology.ts";
import { Engine, type Json } from "./fixtures/engine_client.ts";

const NODE_NAME = "knp-e2e-node";
const TCP_PORT = 8080;
const UDP_PORT = 5353;
const PROBES = 24;

type Conditions = { ready: boolean; serving: boolean; terminating: boolean };
const READY: Conditions = { ready: true, serving: true, terminating: false };
/** Terminating but still serving: a candidate for the terminating fallback. */
const DRAINING: Conditions = { ready: false, serving: true, terminating: true };
/** Terminating and no longer serving. */
const GONE: Conditions = { ready: false, serving: false, terminating: true };

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

function service(name: string, clusterIP: string): Json {
  return {
    kind: "Service",
    metadata: { namespace: "e2e", name, resourceVersion: "1" },
    spec: {
      type: "ClusterIP",
      clusterIP,
      clusterIPs: [clusterIP],
      ipFamilies: ["IPv4"],
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: TCP_PORT }],
    },
  };
}

let version = 0;

/** Slice `name` of Service `svc`: each endpoint is [ip, pod name, conditions]. */
function slice(svc: string, name: string, eps: [string, string, Conditions][]): Json {
  return {
    kind: "EndpointSlice",
    metadata: {
      namespace: "e2e",
      name,
      labels: { "kubernetes.io/service-name": svc },
      resourceVersion: String(++version),
    },
    addressType: "IPv4",
    endpoints: eps.map(([ip, pod, conditions]) => ({
      addresses: [ip],
      conditions,
      nodeName: NODE_NAME,
      targetRef: { kind: "Pod", namespace: "e2e", name: pod, uid: `uid-${pod}` },
    })),
    ports: [{ name: "http", protocol: "TCP", port: TCP_PORT }],
  };
}

/** PROBES fresh TCP connections to ip:80; the labels that answered, counted. */
async function spread(topo: Topology, ip: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [label] of replies(await topo.request(topo.client, "tcp", ip, 80, PROBES))) {
    out[label] = (out[label] ?? 0) + 1;
  }
  return out;
}

async function withEngine(tag: string, fn: (topo: Topology, e: Engine) => Promise<void>) {
  const topo = await Topology.create({ pods: 2, tag });
  try {
    await topo.startEcho(0, "A", TCP_PORT, UDP_PORT);
    await topo.startEcho(1, "B", TCP_PORT, UDP_PORT);
    const engine = await Engine.start(topo, ["--families=4"]);
    try {
      await engine.apply(nodeObject());
      await fn(topo, engine);
    } finally {
      await engine.stop();
    }
  } finally {
    await topo.close();
  }
}

e2eTest(
  "IP reuse: a terminating ghost in one slice does not decide its reused address",
  async () => {
    await withEngine("reuse", async (topo, engine) => {
      const vip = "198.19.0.80";
      const a = topo.podIPv4(0), b = topo.podIPv4(1);
      await engine.apply(service("web", vip));
      // The old Pod (terminating, still serving) and B (terminating too) in the old slice.
      const ghostSlice = (bState: Conditions) =>
        slice("web", "web-old", [[a, "old-pod", DRAINING], [b, "b-pod", bState]]);
      await engine.apply(ghostSlice(DRAINING));
      await engine.send({ op: "synced" });
      await engine.send({ op: "wait-sync" });
      // Control: with only terminating endpoints, the fallback spreads traffic over both.
      const before = await spread(topo, vip);
      assert.ok(
        before.A > 0 && before.B > 0,
        `terminating fallback uses A and B: ${JSON.stringify(before)}`,
      );

      // The pod network gives A's address to a new, ready Pod; its slice is written...
      await engine.apply(slice("web", "web-new", [[a, "new-pod", READY]]));
      // ...and then the ghost's slice changes again (B stops serving), so it is the newer one.
      await engine.apply(ghostSlice(GONE));
      await engine.send({ op: "wait-sync" });
      const after = await spread(topo, vip);
      // A ready endpoint exists, so the Service is not terminating-only: B gets nothing.
      assert.deepEqual(
        after,
        { A: PROBES },
        "every connection reaches the live Pod on the reused IP",
      );

      // The ghost going non-serving changes nothing, and neither does its slice's deletion.
      await engine.apply(slice("web", "web-old", [[a, "old-pod", GONE], [b, "b-pod", GONE]]));
      await engine.send({ op: "wait-sync" });
      assert.deepEqual(await spread(topo, vip), { A: PROBES });
      console.log(
        `    reused IP: before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`,
      );
    });
  },
);

e2eTest(
  "IP reuse: an endpoint moving between slices takes the newer slice's conditions",
  async () => {
    await withEngine("move", async (topo, engine) => {
      const vip = "198.19.0.81";
      const a = topo.podIPv4(0), b = topo.podIPv4(1);
      await engine.apply(service("api", vip));
      await engine.apply(slice("api", "api-1", [[a, "pod-a", READY], [b, "pod-b", READY]]));
      await engine.send({ op: "synced" });
      await engine.send({ op: "wait-sync" });
      const both = await spread(topo, vip);
      assert.ok(both.A > 0 && both.B > 0, `both serve at first: ${JSON.stringify(both)}`);

      // The controller writes pod-a into api-2 as it stops serving, before api-1 drops it: the
      // same Pod twice, and api-2 is the newer word on it.
      await engine.apply(slice("api", "api-2", [[a, "pod-a", GONE]]));
      await engine.send({ op: "wait-sync" });
      const moved = await spread(topo, vip);
      assert.deepEqual(
        moved,
        { B: PROBES },
        "no new connection goes to the Pod that stopped serving",
      );

      // api-1 catches up and drops its copy: the same result.
      await engine.apply(slice("api", "api-1", [[b, "pod-b", READY]]));
      await engine.send({ op: "wait-sync" });
      assert.deepEqual(await spread(topo, vip), { B: PROBES });
      console.log(
        `    moved endpoint: before ${JSON.stringify(both)}, while moving ${JSON.stringify(moved)}`,
      );
    });
  },
);
