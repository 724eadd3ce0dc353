/**
 * The three clusters behind the golden files (tests/golden/<name>.nft), also
 * traced against a real kernel by tests/e2e/dataplane_test.ts.
 *
 * @module
 */
import type { EndpointInfo, ProxierConfig, ProxyState, ServicePortInfo } from "../proxier/model.ts";
import { endpoint, servicePort } from "../proxier/model_testing.ts";

const svc = (id: string, o: Partial<ServicePortInfo>) => servicePort(id, { family: 4, ...o });

const ep = endpoint;

/** A cluster state and the proxier settings it is programmed with. */
export interface GoldenCluster {
  state: ProxyState;
  config: ProxierConfig;
}

function cluster(
  family: 4 | 6,
  list: [ServicePortInfo, EndpointInfo[]][],
  node: ProxyState["node"],
  serviceCIDRs: string[],
  config: ProxierConfig,
): GoldenCluster {
  return {
    state: {
      family,
      services: new Map(list.map(([s]) => [s.id, s])),
      endpoints: new Map(list.map(([s, e]) => [s.id, e])),
      node,
      serviceCIDRs,
    },
    config,
  };
}

/** The three clusters, by golden file name. */
export const GOLDEN: Record<string, GoldenCluster> = {
  // ClusterIP and NodePort services, cluster-CIDR local detection.
  "basic-ipv4": cluster(
    4,
    [
      [svc("kube-system/kube-dns:dns", { clusterIP: "198.19.0.10", protocol: "UDP", port: 53 }), [
        ep("198.18.129.2", 53, { isLocal: true }),
        ep("198.18.130.2", 53),
      ]],
      [svc("kube-system/kube-dns:dns-tcp", { clusterIP: "198.19.0.10", port: 53 }), [
        ep("198.18.129.2", 53, { isLocal: true }),
        ep("198.18.130.2", 53),
      ]],
      [svc("default/web:http", { clusterIP: "198.19.0.20", nodePort: 30080 }), [
        ep("198.18.129.5", 8080, { isLocal: true }),
        ep("198.18.130.5", 8080),
        ep("198.18.131.5", 8080),
      ]],
      [svc("default/idle:http", { clusterIP: "198.19.0.30", nodePort: 30090 }), []],
    ],
    { name: "node-a", labels: {}, ips: ["198.18.0.1"], podCIDRs: ["198.18.129.0/24"] },
    ["198.19.0.0/16"],
    {
      masqueradeAll: false,
      masqueradeBit: 14,
      localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.128.0/17"] },
      nodePortAddresses: ["primary"],
    },
  ),
  // LoadBalancers: source ranges, eTP=Local, affinity, SCTP; NodePorts on every local address.
  "loadbalancer-ipv4": cluster(
    4,
    [
      [
        svc("shop/frontend:https", {
          clusterIP: "198.19.1.1",
          port: 443,
          nodePort: 31443,
          loadBalancerIPs: ["198.18.200.1"],
          loadBalancerSourceRanges: ["198.18.50.0/24", "198.18.0.0/24"],
          externalPolicyLocal: true,
          healthCheckNodePort: 32000,
        }),
        [ep("198.18.129.10", 8443, { isLocal: true }), ep("198.18.130.10", 8443)],
      ],
      [
        svc("shop/cart:http", {
          clusterIP: "198.19.1.2",
          externalIPs: ["198.18.200.2"],
          stickyMaxAgeSeconds: 10800,
        }),
        [ep("198.18.129.11", 8080, { isLocal: true }), ep("198.18.130.11", 8080)],
      ],
      [svc("shop/signal:sctp", { clusterIP: "198.19.1.3", protocol: "SCTP", port: 9999 }), [
        ep("198.18.131.12", 9999),
      ]],
      [
        svc("shop/batch:http", {
          clusterIP: "198.19.1.4",
          nodePort: 31004,
          loadBalancerIPs: ["198.18.200.4"],
          externalPolicyLocal: true,
        }),
        [ep("198.18.130.13", 8080)],
      ],
      // Longest legal names: chain names stay under 256 bytes, comments are cut to 128.
      [
        svc(`${"n".repeat(63)}/${"s".repeat(63)}:${"p".repeat(63)}`, {
          clusterIP: "198.19.1.5",
          stickyMaxAgeSeconds: 60,
        }),
        [ep("198.18.130.14", 8080)],
      ],
    ],
    { name: "node-b", labels: {}, ips: ["198.18.0.2"], podCIDRs: ["198.18.129.0/24"] },
    ["198.19.0.0/16", "198.19.128.0/17"],
    {
      masqueradeAll: false,
      masqueradeBit: 14,
      localDetector: { mode: "NodeCIDR" },
      nodePortAddresses: ["0.0.0.0/0"],
    },
  ),
  // IPv6: internalTrafficPolicy Local, topology hints, terminating fallback.
  "topology-ipv6": cluster(
    6,
    [
      [svc("apps/api:grpc", { family: 6, clusterIP: "2001:db8:ffff::10", port: 9090 }), [
        ep("2001:db8:129::5", 9090, { isLocal: true, zoneHints: ["zone-a"] }),
        ep("2001:db8:130::5", 9090, { zoneHints: ["zone-a"] }),
        ep("2001:db8:131::5", 9090, { zoneHints: ["zone-b"] }),
      ]],
      [
        svc("apps/agent:metrics", {
          family: 6,
          clusterIP: "2001:db8:ffff::11",
          port: 9100,
          internalPolicyLocal: true,
        }),
        [ep("2001:db8:129::6", 9100, { isLocal: true }), ep("2001:db8:130::6", 9100)],
      ],
      [svc("apps/draining:http", { family: 6, clusterIP: "2001:db8:ffff::12" }), [
        ep("2001:db8:130::7", 8080, { ready: false, serving: true, terminating: true }),
        ep("2001:db8:131::7", 8080, { ready: false, serving: false, terminating: true }),
      ]],
    ],
    {
      name: "node-c",
      labels: { "topology.kubernetes.io/zone": "zone-a" },
      ips: ["198.18.0.3", "2001:db8::3"],
      podCIDRs: ["198.18.129.0/24", "2001:db8:129::/64"],
    },
    ["2001:db8:ffff::/112"],
    {
      masqueradeAll: false,
      masqueradeBit: 14,
      localDetector: { mode: "InterfaceNamePrefix", prefix: "veth" },
      nodePortAddresses: ["2001:db8::/64"],
    },
  ),
};
