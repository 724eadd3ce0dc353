/**
 * Synthetic clusters for tests and benchmarks: ProxyState built directly,
 * no Kubernetes objects. Addresses come only from 198.18.0.0/15 (IPv4) and
 * 2001:db8::/32 (IPv6): ClusterIPs from 198.18.0.0/16, endpoints from
 * 198.19.0.0/16 (reused round-robin past 65k endpoints).
 *
 * @module
 */
import type {
  EndpointInfo,
  ProxierConfig,
  ProxyState,
  ServicePortInfo,
} from "../../proxier/model.ts";
import type { IpFamily } from "../../net/family.ts";

/** Shape of a synthetic cluster. */
export interface SyntheticOptions {
  services: number;
  endpointsPerService: number;
  family?: IpFamily;
  /** Every n-th service gets a NodePort (0 = none). Default 10. */
  nodePortEvery?: number;
  /** Every n-th service is UDP (0 = none). Default 5. */
  udpEvery?: number;
}

/** Max distinct addresses in each /16 we draw from (skip .0 and .255 edge cases by offsetting). */
const SPAN = 65_000;

/** The i-th address of a /16 (IPv4) or a /96 (IPv6) pool. */
export function poolAddress(family: IpFamily, pool: 0 | 1, i: number): string {
  const n = (i % SPAN) + 10;
  if (family === 4) return `198.${18 + pool}.${n >> 8}.${n & 255}`;
  return `2001:db8:${pool === 0 ? "a" : "b"}::${n.toString(16)}`;
}

/** The service port id of the i-th synthetic service. */
export function serviceId(i: number): string {
  return `ns${i % 100}/svc${i}:p`;
}

/** Builds the i-th service port. */
export function syntheticService(i: number, o: SyntheticOptions): ServicePortInfo {
  const family = o.family ?? 4;
  const npEvery = o.nodePortEvery ?? 10;
  const udpEvery = o.udpEvery ?? 5;
  return {
    id: serviceId(i),
    namespace: `ns${i % 100}`,
    name: `svc${i}`,
    portName: "p",
    protocol: udpEvery > 0 && i % udpEvery === 0 ? "UDP" : "TCP",
    family,
    clusterIP: poolAddress(family, 0, i),
    port: 80 + (i % 1000),
    // Unique NodePorts from 30000-32767 (the default range): later services get none.
    nodePort: npEvery > 0 && i % npEvery === 0 && i / npEvery < 2768 ? 30000 + i / npEvery : 0,
    externalIPs: [],
    loadBalancerIPs: [],
    loadBalancerSourceRanges: [],
    stickyMaxAgeSeconds: 0,
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
  };
}

/** Builds the endpoints of the i-th service (generation `gen` shifts the addresses). */
export function syntheticEndpoints(
  i: number,
  o: SyntheticOptions,
  gen = 0,
): EndpointInfo[] {
  const family = o.family ?? 4;
  const out: EndpointInfo[] = [];
  for (let j = 0; j < o.endpointsPerService; j++) {
    out.push({
      ip: poolAddress(family, 1, i * o.endpointsPerService + j + gen),
      port: 8080,
      ready: true,
      serving: true,
      terminating: false,
      isLocal: false,
      nodeName: `node${j % 50}`,
    });
  }
  return out;
}

/** A mutable ProxyState (plain Maps) for a synthetic cluster. */
export interface MutableState extends ProxyState {
  services: Map<string, ServicePortInfo>;
  endpoints: Map<string, readonly EndpointInfo[]>;
}

/** Builds a whole synthetic cluster. */
export function syntheticState(o: SyntheticOptions): MutableState {
  const family = o.family ?? 4;
  const services = new Map<string, ServicePortInfo>();
  const endpoints = new Map<string, readonly EndpointInfo[]>();
  for (let i = 0; i < o.services; i++) {
    const svc = syntheticService(i, o);
    services.set(svc.id, svc);
    if (o.endpointsPerService > 0) endpoints.set(svc.id, syntheticEndpoints(i, o));
  }
  return {
    family,
    services,
    endpoints,
    node: {
      name: "node0",
      labels: { "topology.kubernetes.io/zone": "z1" },
      ips: [family === 4 ? "198.18.255.1" : "2001:db8:ff::1"],
      podCIDRs: [family === 4 ? "198.19.0.0/16" : "2001:db8:b::/64"],
    },
    serviceCIDRs: [family === 4 ? "198.18.0.0/16" : "2001:db8:a::/64"],
  };
}

/** A typical proxier configuration for synthetic clusters. */
export function syntheticConfig(family: IpFamily = 4): ProxierConfig {
  return {
    masqueradeAll: false,
    masqueradeBit: 14,
    localDetector: {
      mode: "ClusterCIDR",
      cidrs: [family === 4 ? "198.19.0.0/16" : "2001:db8:b::/64"],
    },
    nodePortAddresses: ["primary"],
  };
}

/** An empty stale report. */
export function noStale(): { servicesWithNewEndpoints: []; deletedEndpoints: [] } {
  return { servicesWithNewEndpoints: [], deletedEndpoints: [] };
}
