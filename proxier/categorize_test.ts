import assert from "node:assert/strict";
import {
  categorizeEndpoints,
  topologyMode,
  usesClusterEndpoints,
  usesLocalEndpoints,
} from "./categorize.ts";
import type { EndpointInfo, NodeInfo, ServicePortInfo } from "./model.ts";
import { servicePort } from "./model_testing.ts";

const NODE: NodeInfo = {
  name: "node1",
  labels: { "topology.kubernetes.io/zone": "zone-a" },
  ips: ["198.18.0.1"],
  podCIDRs: [],
};

function svc(o: Partial<ServicePortInfo> = {}): ServicePortInfo {
  return servicePort("ns/s:p", { clusterIP: "198.19.0.1", ...o });
}

function ep(ip: string, o: Partial<EndpointInfo> = {}): EndpointInfo {
  return { ip, port: 80, ready: true, serving: true, terminating: false, isLocal: false, ...o };
}

const ips = (eps: EndpointInfo[]) => eps.map((e) => e.ip);
const term = { ready: false, serving: true, terminating: true };
const gone = { ready: false, serving: false, terminating: true };

Deno.test("policy usage", () => {
  assert.equal(usesClusterEndpoints(svc()), true);
  assert.equal(usesLocalEndpoints(svc()), false);
  assert.equal(usesClusterEndpoints(svc({ internalPolicyLocal: true })), false);
  assert.equal(usesLocalEndpoints(svc({ internalPolicyLocal: true })), true);
  // eTP=Local only counts when the service is reachable from outside.
  assert.equal(usesLocalEndpoints(svc({ externalPolicyLocal: true })), false);
  const np = svc({ nodePort: 30000, externalPolicyLocal: true });
  assert.equal(usesLocalEndpoints(np), true);
  assert.equal(usesClusterEndpoints(np), true);
  const both = svc({ nodePort: 30000, externalPolicyLocal: true, internalPolicyLocal: true });
  // Both Local: pods and the node still reach external addresses through every endpoint.
  assert.equal(usesClusterEndpoints(both), true);
  // iTP=Local but eTP=Cluster with a NodePort still needs cluster endpoints.
  assert.equal(usesClusterEndpoints(svc({ nodePort: 30000, internalPolicyLocal: true })), true);
});

Deno.test("cluster policy: ready endpoints only", () => {
  const r = categorizeEndpoints(svc(), [
    ep("a"),
    ep("b", { ready: false, serving: false }),
    ep("c", term),
  ], NODE);
  assert.deepEqual(ips(r.clusterEndpoints), ["a"]);
  assert.deepEqual(r.localEndpoints, []);
  assert.deepEqual(ips(r.allReachableEndpoints), ["a"]);
  assert.equal(r.hasAnyEndpoints, true);
});

Deno.test("cluster policy: serving+terminating fallback when nothing is ready", () => {
  const r = categorizeEndpoints(svc(), [ep("a", term), ep("b", gone), ep("c", term)], NODE);
  assert.deepEqual(ips(r.clusterEndpoints), ["a", "c"]);
  assert.equal(r.hasAnyEndpoints, true);
});

Deno.test("no usable endpoints at all", () => {
  const r = categorizeEndpoints(svc(), [ep("b", gone)], NODE);
  assert.deepEqual(r.clusterEndpoints, []);
  assert.equal(r.hasAnyEndpoints, false);
  assert.equal(categorizeEndpoints(svc(), [], NODE).hasAnyEndpoints, false);
});

Deno.test("internalTrafficPolicy Local: local ready endpoints", () => {
  const s = svc({ internalPolicyLocal: true });
  const r = categorizeEndpoints(s, [
    ep("a", { isLocal: true }),
    ep("b"),
    ep("c", { isLocal: true, ...term }),
  ], NODE);
  assert.deepEqual(r.clusterEndpoints, []);
  assert.deepEqual(ips(r.localEndpoints), ["a"]);
  assert.deepEqual(ips(r.allReachableEndpoints), ["a"]);
  assert.equal(r.hasAnyEndpoints, true);
});

Deno.test("Local policy: remote endpoints only -> none local, but hasAnyEndpoints", () => {
  const r = categorizeEndpoints(svc({ internalPolicyLocal: true }), [ep("b")], NODE);
  assert.deepEqual(r.localEndpoints, []);
  assert.equal(r.hasAnyEndpoints, true);
  const t = categorizeEndpoints(svc({ internalPolicyLocal: true }), [ep("b", term)], NODE);
  assert.equal(t.hasAnyEndpoints, true);
  const g = categorizeEndpoints(svc({ internalPolicyLocal: true }), [ep("b", gone)], NODE);
  assert.equal(g.hasAnyEndpoints, false);
});

Deno.test("Local policy: local serving+terminating fallback", () => {
  const s = svc({ nodePort: 30000, externalPolicyLocal: true });
  const r = categorizeEndpoints(s, [ep("a", { isLocal: true, ...term }), ep("b")], NODE);
  assert.deepEqual(ips(r.localEndpoints), ["a"]);
  assert.deepEqual(ips(r.clusterEndpoints), ["b"]);
  // The union keeps the local terminating endpoint that cluster traffic does not use.
  assert.deepEqual(ips(r.allReachableEndpoints), ["b", "a"]);
});

Deno.test("eTP=Local: union of cluster and local without duplicates", () => {
  const s = svc({ loadBalancerIPs: ["198.18.100.1"], externalPolicyLocal: true });
  const r = categorizeEndpoints(s, [ep("a", { isLocal: true }), ep("b")], NODE);
  assert.deepEqual(ips(r.clusterEndpoints), ["a", "b"]);
  assert.deepEqual(ips(r.localEndpoints), ["a"]);
  assert.deepEqual(ips(r.allReachableEndpoints), ["a", "b"]);
});

Deno.test("zone hints: used when every ready endpoint has them and one matches", () => {
  const eps = [ep("a", { zoneHints: ["zone-a"] }), ep("b", { zoneHints: ["zone-b"] })];
  assert.equal(topologyMode(eps, NODE), "zone");
  assert.deepEqual(ips(categorizeEndpoints(svc(), eps, NODE).clusterEndpoints), ["a"]);
});

Deno.test("zone hints: ignored when one ready endpoint lacks hints", () => {
  const eps = [ep("a", { zoneHints: ["zone-a"] }), ep("b")];
  assert.equal(topologyMode(eps, NODE), "none");
  assert.deepEqual(ips(categorizeEndpoints(svc(), eps, NODE).clusterEndpoints), ["a", "b"]);
  // ...but an unready endpoint without hints does not matter.
  const eps2 = [ep("a", { zoneHints: ["zone-a"] }), ep("c", { ready: false, serving: false })];
  assert.equal(topologyMode(eps2, NODE), "zone");
});

Deno.test("zone hints: ignored when none is for this zone or the node has no zone", () => {
  const eps = [ep("a", { zoneHints: ["zone-b"] }), ep("b", { zoneHints: ["zone-c"] })];
  assert.equal(topologyMode(eps, NODE), "none");
  const noZone = { ...NODE, labels: {} };
  assert.equal(topologyMode([ep("a", { zoneHints: ["zone-a"] })], noZone), "none");
});

Deno.test("node hints: win over zone hints when all endpoints have them", () => {
  const eps = [
    ep("a", { nodeHints: ["node1"], zoneHints: ["zone-b"] }),
    ep("b", { nodeHints: ["node2"], zoneHints: ["zone-a"] }),
  ];
  assert.equal(topologyMode(eps, NODE), "node");
  assert.deepEqual(ips(categorizeEndpoints(svc(), eps, NODE).clusterEndpoints), ["a"]);
  // Not for this node: fall back to zone hints.
  const other = { ...NODE, name: "node3" };
  assert.equal(topologyMode(eps, other), "zone");
  assert.deepEqual(ips(categorizeEndpoints(svc(), eps, other).clusterEndpoints), ["b"]);
});

Deno.test("topology does not apply to Local policy", () => {
  const s = svc({ internalPolicyLocal: true });
  const eps = [
    ep("a", { isLocal: true, zoneHints: ["zone-b"] }),
    ep("b", { zoneHints: ["zone-a"] }),
  ];
  const r = categorizeEndpoints(s, eps, NODE);
  assert.deepEqual(ips(r.localEndpoints), ["a"]);
  assert.equal(r.topology, "none");
});

Deno.test("topology hints with only terminating endpoints fall back to all serving ones", () => {
  const eps = [
    ep("a", { ...term, zoneHints: ["zone-b"] }),
    ep("b", { ...term, zoneHints: ["zone-a"] }),
  ];
  assert.deepEqual(ips(categorizeEndpoints(svc(), eps, NODE).clusterEndpoints), ["a", "b"]);
});
