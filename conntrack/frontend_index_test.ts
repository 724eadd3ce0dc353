import assert from "node:assert/strict";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../proxier/model.ts";
import { servicePort } from "../proxier/model_testing.ts";
import { buildFrontendIndex, IndexEntries, indexEntry, indexUpdate } from "./frontend_index.ts";

function ep(ip: string, o: Partial<EndpointInfo> = {}): EndpointInfo {
  return { ip, port: 53, ready: true, serving: true, terminating: false, isLocal: false, ...o };
}

function state(ports: [ServicePortInfo, EndpointInfo[]][]): ProxyState {
  return {
    family: 4,
    services: new Map(ports.map(([s]) => [s.id, s])),
    endpoints: new Map(ports.map(([s, e]) => [s.id, e])),
    node: { name: "n", labels: {}, ips: ["198.18.100.1"], podCIDRs: [] },
    serviceCIDRs: ["198.19.0.0/16"],
  };
}

const DNS = servicePort("ns/dns:dns", {
  protocol: "UDP",
  clusterIP: "198.19.0.10",
  port: 53,
  nodePort: 30053,
  externalIPs: ["198.18.50.1"],
});
const WEB = servicePort("ns/web:http", { protocol: "TCP", clusterIP: "198.19.0.20", port: 80 });
const V6 = servicePort("ns/v6:dns", { protocol: "UDP", family: 6, clusterIP: "2001:db8::a" });

Deno.test("indexEntry: TCP ports give their ClusterIP only; UDP ones frontends and serving endpoints", () => {
  assert.deepEqual(indexEntry(WEB, [ep("198.18.1.1")]), { clusterIP: "198.19.0.20" });
  // Inside the ServiceCIDRs a TCP port adds nothing; a UDP one keeps its frontends.
  assert.equal(indexEntry(WEB, [], () => true), null);
  assert.equal(indexEntry(DNS, [], () => true)?.clusterIP, "");
  assert.deepEqual(indexEntry(DNS, [], () => true)?.udp?.ips, ["198.19.0.10", "198.18.50.1"]);
  assert.deepEqual(
    indexEntry(DNS, [ep("198.18.1.1"), ep("198.18.1.2", { ready: false, serving: false })]),
    {
      clusterIP: "198.19.0.10",
      udp: { ips: ["198.19.0.10", "198.18.50.1"], port: 53, nodePort: 30053, eps: ["198.18.1.1"] },
    },
  );
  assert.throws(() => indexEntry({ ...DNS, clusterIP: "x" }), /ClusterIP of ns\/dns:dns "x"/);
});

Deno.test("IndexEntries: a reset then per-sync updates give the index of the final state", () => {
  const s1 = state([[DNS, [ep("198.18.1.1")]], [WEB, []], [V6, [ep("2001:db8::1")]]]);
  const kept = new IndexEntries();
  assert.equal(kept.has(4), false);
  kept.apply(indexUpdate(s1));
  assert.deepEqual(kept.index(4, s1.serviceCIDRs), buildFrontendIndex(s1));
  // A second UDP port shares DNS's external IP and port: the endpoints are merged.
  const DNS2 = servicePort("ns/dns2:dns", {
    protocol: "UDP",
    clusterIP: "198.19.0.11",
    port: 53,
    externalIPs: ["198.18.50.1"],
  });
  const s2 = state([[DNS, [ep("198.18.1.3")]], [DNS2, [ep("198.18.1.4")]]]);
  kept.apply(indexUpdate(s2, [DNS.id, DNS2.id, WEB.id]));
  const got = kept.index(4, s2.serviceCIDRs, { nodePortIPs: ["198.18.100.1"] });
  assert.deepEqual(got, buildFrontendIndex(s2, { nodePortIPs: ["198.18.100.1"] }));
  assert.deepEqual([...got.frontends.get("198.18.50.1")!.get(53)!].sort(), [
    "198.18.1.3",
    "198.18.1.4",
  ]);
  // Both ClusterIPs are inside the ServiceCIDR: the range already makes them service space.
  assert.deepEqual([...got.clusterIPs], []);
  const bare = { ...s2, serviceCIDRs: [] };
  assert.deepEqual([...buildFrontendIndex(bare).clusterIPs].sort(), ["198.19.0.10", "198.19.0.11"]);
  // The IPv6 port never enters the IPv4 index.
  assert.equal(indexUpdate(s1).entries.find(([id]) => id === V6.id), undefined);
  assert.deepEqual(indexUpdate(s1, [V6.id]).entries, [[V6.id, null]]);
});
