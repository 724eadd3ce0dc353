/**
 * Regression tests for proxier bugs the fuzzed-cluster-state property found, each reduced to
 * the API objects that showed it and traced through the agent's pipeline.
 */
import assert from "node:assert/strict";
import type { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import { tableReader } from "../../proxier/nftables/trace/reader.ts";
import { type Packet, trace } from "../../proxier/nftables/trace/tracer.ts";
import type { ProxierConfig } from "../../proxier/model.ts";
import { NET } from "./net.ts";
import { AgentPipeline, type WorldEvent } from "./pipeline.ts";

// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

const CONFIG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: [...NET.clusterCIDRs] },
  nodePortAddresses: [],
};

const NODE = "fuzz-node";

const node: Obj = {
  metadata: { name: NODE, resourceVersion: "1", labels: {} },
  status: {
    addresses: [
      { type: "InternalIP", address: NET.nodeIP[4] },
      { type: "InternalIP", address: NET.nodeIP[6] },
    ],
  },
};

function service(extra: Obj): Obj {
  return {
    metadata: { namespace: "default", name: "both-local", resourceVersion: "2" },
    spec: {
      type: "NodePort",
      clusterIP: "198.19.0.7",
      clusterIPs: ["198.19.0.7"],
      ipFamilies: ["IPv4"],
      ports: [{ name: "metrics", protocol: "UDP", port: 443, nodePort: 30443 }],
      externalIPs: ["198.18.200.4"],
      internalTrafficPolicy: "Local",
      externalTrafficPolicy: "Local",
      ...extra,
    },
  };
}

function slice(endpoints: [string, string][]): Obj {
  return {
    metadata: {
      namespace: "default",
      name: "both-local-abcde",
      resourceVersion: "3",
      labels: { "kubernetes.io/service-name": "both-local" },
    },
    addressType: "IPv4",
    ports: [{ name: "metrics", protocol: "UDP", port: 1 }],
    endpoints: endpoints.map(([ip, nodeName]) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName,
    })),
  };
}

async function program(objs: [WorldEvent["kind"], Obj][]) {
  const p = await AgentPipeline.coldStart(
    { nodeName: NODE, config: CONFIG, now: () => 0 },
    objs.map(([kind, obj]) => ({ kind, type: "ADDED", obj })),
  );
  assert.deepEqual(p.complaints, []);
  const reader = tableReader((p.clients[4] as MemoryNftables).state()!);
  return async (from: Packet["from"], src: string, dst: string, dport: number) => {
    const r = await trace(reader, { from, src, dst, proto: "udp", dport }, {
      nodeIPs: [NET.nodeIP[4]],
    });
    return {
      verdict: r.verdict,
      targets: r.candidates.map((c) => `${c.dnat} masq=${c.masquerade}`),
    };
  };
}

// Bug 1: with internalTrafficPolicy Local as well as externalTrafficPolicy Local, pods and the
// node reaching a NodePort or external IP were held to local endpoints (or dropped when there
// were none). Upstream's UsesClusterEndpoints is true for any externally accessible port: the
// short-circuit to every endpoint applies whatever the internal policy.
Deno.test("iTP=Local + eTP=Local: pods and the node reach every endpoint of external addresses", async () => {
  const t = await program([
    ["Node", node],
    ["Service", service({})],
    ["EndpointSlice", slice([["198.18.66.36", "node-b"], ["198.18.65.37", NODE]])],
  ]);
  const all = (masq: boolean) => [`198.18.65.37:1 masq=${masq}`, `198.18.66.36:1 masq=${masq}`];
  assert.deepEqual(await t("pod", "198.18.65.250", "198.18.200.4", 443), {
    verdict: "ACCEPT",
    targets: all(false),
  });
  assert.deepEqual(await t("host", NET.nodeIP[4], "198.18.200.4", 443), {
    verdict: "ACCEPT",
    targets: all(true),
  });
  assert.deepEqual(await t("pod", "198.18.65.250", NET.nodeIP[4], 30443), {
    verdict: "ACCEPT",
    targets: all(false),
  });
  // Outside clients keep their source and only the local endpoint; ClusterIP stays local-only.
  assert.deepEqual(await t("offnode", NET.clientA[4], NET.nodeIP[4], 30443), {
    verdict: "ACCEPT",
    targets: ["198.18.65.37:1 masq=false"],
  });
  assert.deepEqual(await t("pod", "198.18.65.250", "198.19.0.7", 443), {
    verdict: "ACCEPT",
    targets: ["198.18.65.37:1 masq=false"],
  });
});

Deno.test("iTP=Local + eTP=Local without local endpoints: outside DROP, pods and node still served", async () => {
  const t = await program([
    ["Node", node],
    ["Service", service({})],
    ["EndpointSlice", slice([["198.18.66.36", "node-b"]])],
  ]);
  assert.deepEqual(await t("offnode", NET.clientA[4], NET.nodeIP[4], 30443), {
    verdict: "DROP",
    targets: [],
  });
  assert.deepEqual(await t("pod", "198.18.65.250", "198.19.0.7", 443), {
    verdict: "DROP",
    targets: [],
  });
  assert.deepEqual(await t("host", NET.nodeIP[4], NET.nodeIP[4], 30443), {
    verdict: "ACCEPT",
    targets: ["198.18.66.36:1 masq=true"],
  });
  assert.deepEqual(await t("pod", "198.18.65.250", "198.18.200.4", 443), {
    verdict: "ACCEPT",
    targets: ["198.18.66.36:1 masq=false"],
  });
});
