/**
 * The tracer tests' cluster: one representative set of Services on one node, programmed
 * through a real sync into MemoryNftables, and a packet builder. Used by tracer_test.ts (the
 * behaviours one at a time) and tracer_cases_test.ts (the table of packets).
 */
import type {
  EndpointInfo,
  NodeInfo,
  ProxierConfig,
  ProxyState,
  ServicePortInfo,
} from "../../../model.ts";
import { type Packet, trace, type TraceResult } from "../tracer.ts";
import { tableReader } from "../reader.ts";
import { endpoint, servicePort } from "../../../model_testing.ts";
import { programFake } from "../../../../tests/programmed.ts";

export const NODE_IP = "198.18.0.1";
export const SECOND_NODE_IP = "198.18.0.99";
export const CLIENT = "198.18.50.5"; // off-cluster
export const POD = "198.18.129.10"; // pod on this node (podCIDR 198.18.129.0/24)
export const EP_L1 = "198.18.129.11"; // local endpoints
export const EP_L2 = "198.18.129.12";
export const EP_R = "198.18.130.11"; // endpoint on another node

/** An IPv4 service port of the cluster. */
export const svc = (id: string, o: Partial<ServicePortInfo>) =>
  servicePort(id, { family: 4, ...o });

/** An endpoint on port 8080, local when it is in this node's pod CIDR. */
export function ep(ip: string, o: Partial<EndpointInfo> = {}): EndpointInfo {
  const isLocal = ip.startsWith("198.18.129.") || ip.startsWith("2001:db8:129:");
  return endpoint(ip, 8080, { isLocal, ...o });
}

/** The cluster: every kind of Service port with its endpoints. */
export const SERVICES: [ServicePortInfo, EndpointInfo[]][] = [
  [svc("ns/cip:http", { clusterIP: "198.19.0.1" }), [ep(EP_L1), ep(EP_R)]],
  [svc("ns/udp:dns", { clusterIP: "198.19.0.2", protocol: "UDP", port: 53 }), [
    ep(EP_L1, { port: 5353 }),
  ]],
  [svc("ns/sctp:s", { clusterIP: "198.19.0.3", protocol: "SCTP", port: 9 }), [
    ep(EP_L2, { port: 9 }),
  ]],
  [
    svc("ns/np:http", { clusterIP: "198.19.0.4", nodePort: 30004, externalIPs: ["198.18.100.2"] }),
    [ep(EP_L1), ep(EP_R)],
  ],
  [
    svc("ns/lb:http", {
      clusterIP: "198.19.0.5",
      nodePort: 30005,
      loadBalancerIPs: ["198.18.100.1"],
      loadBalancerSourceRanges: ["198.18.50.0/24"],
    }),
    [ep(EP_L1)],
  ],
  [
    svc("ns/lbnode:http", {
      clusterIP: "198.19.0.6",
      loadBalancerIPs: ["198.18.100.3"],
      loadBalancerSourceRanges: ["198.18.0.0/24"],
    }),
    [ep(EP_L1)],
  ],
  [
    svc("ns/local:http", {
      clusterIP: "198.19.0.7",
      nodePort: 30007,
      externalIPs: ["198.18.100.7"],
      loadBalancerIPs: ["198.18.100.17"],
      externalPolicyLocal: true,
    }),
    [ep(EP_L1), ep(EP_R)],
  ],
  [
    svc("ns/localnone:http", {
      clusterIP: "198.19.0.8",
      nodePort: 30008,
      externalPolicyLocal: true,
    }),
    [ep(EP_R)],
  ],
  [svc("ns/itplocal:http", { clusterIP: "198.19.0.9", internalPolicyLocal: true }), [ep(EP_R)]],
  [
    svc("ns/noeps:http", {
      clusterIP: "198.19.0.10",
      nodePort: 30010,
      externalIPs: ["198.18.100.10"],
      loadBalancerIPs: ["198.18.100.11"],
    }),
    [],
  ],
  [svc("ns/sticky:http", { clusterIP: "198.19.0.11", stickyMaxAgeSeconds: 10800 }), [
    ep(EP_L1),
    ep(EP_R),
  ]],
  [svc("ns/term:http", { clusterIP: "198.19.0.12" }), [
    ep(EP_L1, { ready: false, serving: true, terminating: true }),
    ep(EP_R, { ready: false, serving: false, terminating: true }),
  ]],
  [svc("ns/topo:http", { clusterIP: "198.19.0.13" }), [
    ep(EP_L1, { zoneHints: ["zone-a"] }),
    ep(EP_R, { zoneHints: ["zone-b"] }),
  ]],
  [svc("ns/topon:http", { clusterIP: "198.19.0.14" }), [
    ep(EP_L1, { nodeHints: ["node1"] }),
    ep(EP_R, { nodeHints: ["node2"] }),
  ]],
  [svc("ns/itplocal-ok:http", { clusterIP: "198.19.0.15", internalPolicyLocal: true }), [
    ep(EP_L1),
    ep(EP_R),
  ]],
];

/** This node. */
export const NODE: NodeInfo = {
  name: "node1",
  labels: { "topology.kubernetes.io/zone": "zone-a" },
  ips: [NODE_IP, "2001:db8::1"],
  podCIDRs: ["198.18.129.0/24", "2001:db8:129::/64"],
};

/** The proxier configuration the cases start from. */
export const BASE_CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.128.0/17", "2001:db8:128::/47"] },
  nodePortAddresses: [],
};

/** The IPv4 state of the cluster. */
export function state4(): ProxyState {
  return {
    family: 4,
    services: new Map(SERVICES.map(([s]) => [s.id, s])),
    endpoints: new Map(SERVICES.map(([s, e]) => [s.id, e])),
    node: NODE,
    serviceCIDRs: ["198.19.0.0/16", "2001:db8:ffff::/112"],
  };
}

/** Programs the state through a real sync into MemoryNftables (which validates references) and traces the result. */
export async function tracerFor(
  cfg: Partial<ProxierConfig> = {},
  st: ProxyState = state4(),
): Promise<(p: Packet) => Promise<TraceResult>> {
  const { fake } = await programFake(st, { ...BASE_CFG, ...cfg });
  const reader = tableReader(fake.state()!);
  const nodeIPs = st.family === 4 ? [NODE_IP, SECOND_NODE_IP] : ["2001:db8::1"];
  return (p: Packet): Promise<TraceResult> => trace(reader, p, { nodeIPs });
}

/** One table case: a packet and what must happen to it. */
export interface Case {
  name: string;
  cfg?: Partial<ProxierConfig>;
  pkt: Packet;
  verdict: TraceResult["verdict"];
  dnat?: string[];
  masq?: boolean;
}

/** A packet. */
export const p = (
  from: Packet["from"],
  src: string,
  dst: string,
  dport: number,
  proto: Packet["proto"] = "tcp",
  iif?: string,
): Packet => ({ from, src, dst, dport, proto, ...(iif ? { iif } : {}) });

/** The DNAT targets of the local and the remote endpoint. */
export const L1 = `${EP_L1}:8080`, R = `${EP_R}:8080`;
