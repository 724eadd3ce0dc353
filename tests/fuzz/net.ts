/**
 * Fixed addresses and the seeded random source of the fuzzed-cluster-state test.
 *
 * @module
 */

export { rng } from "../rng.ts";

/** Fixed facts of the generated clusters. */
export const NET = {
  nodeIP: { 4: "198.18.0.10", 6: "2001:db8::10" },
  podCIDR: { 4: "198.18.65.0/24", 6: "2001:db8:1:1::/64" },
  clusterCIDRs: ["198.18.64.0/18", "2001:db8:1::/48"],
  serviceCIDRs: ["198.19.0.0/16", "2001:db8:ffff::/108"],
  /** Outside the cluster: A inside the usual source range, B outside it. */
  clientA: { 4: "198.18.150.7", 6: "2001:db8:150::7" },
  clientB: { 4: "198.18.151.7", 6: "2001:db8:151::7" },
  /** A pod on another node that is never an endpoint. */
  remotePod: { 4: "198.18.66.250", 6: "2001:db8:1:2::fffa" },
  /** Pods on this node that are never endpoints. */
  localPods: { 4: ["198.18.65.250", "198.18.65.251"], 6: ["2001:db8:1:1::fffa"] },
  /** In the ServiceCIDR, never allocated. */
  unallocated: { 4: "198.19.255.254", 6: "2001:db8:ffff::f:fffe" },
  /** Not a Service address at all. */
  elsewhere: { 4: "198.18.180.1", 6: "2001:db8:180::1" },
  zones: ["zone-a", "zone-b", "zone-c"],
  otherNodes: ["node-b", "node-c"],
} as const;
