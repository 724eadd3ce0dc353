/**
 * The proxier's internal model: what the change trackers produce from
 * Kubernetes objects and what the rule builder consumes. Everything here is
 * already validated and split per IP family.
 *
 * @module
 */

import type { IpFamily } from "../net/family.ts";

/** L4 protocols a Service port may use. */
export type Protocol = "TCP" | "UDP" | "SCTP";

/** One port of one Service, for one IP family. */
export interface ServicePortInfo {
  /** `namespace/name:portName` (portName may be empty), as upstream's ServicePortName. */
  id: string;
  /** The Service's namespace. */
  namespace: string;
  /** The Service's name. */
  name: string;
  /** The port's name (may be empty). */
  portName: string;
  /** TCP, UDP or SCTP. */
  protocol: Protocol;
  /** The IP family of this entry. */
  family: IpFamily;
  /** The family's ClusterIP. */
  clusterIP: string;
  /** The Service port. */
  port: number;
  /** 0 when none. */
  nodePort: number;
  /** ExternalIPs of this family. */
  externalIPs: string[];
  /** LoadBalancer ingress IPs of this family, without those in ipMode Proxy. */
  loadBalancerIPs: string[];
  /** loadBalancerSourceRanges of this family, as CIDRs. */
  loadBalancerSourceRanges: string[];
  /** ClientIP affinity timeout in seconds, or 0 for no affinity. */
  stickyMaxAgeSeconds: number;
  /** externalTrafficPolicy: Local (and the service has external addresses or a NodePort). */
  externalPolicyLocal: boolean;
  /** internalTrafficPolicy: Local. */
  internalPolicyLocal: boolean;
  /** 0 when none. */
  healthCheckNodePort: number;
}

/** One endpoint of one Service port (already merged across EndpointSlices). */
export interface EndpointInfo {
  /** The endpoint's address (canonical). */
  ip: string;
  /** The endpoint's port. */
  port: number;
  /** conditions.ready. */
  ready: boolean;
  /** conditions.serving. */
  serving: boolean;
  /** conditions.terminating. */
  terminating: boolean;
  /** The endpoint runs on this node. */
  isLocal: boolean;
  /** The node it runs on. */
  nodeName?: string;
  /** The zone it runs in. */
  zone?: string;
  /** Topology hints: zones (`hints.forZones`) and nodes (`hints.forNodes`). */
  zoneHints?: string[];
  /** Topology hints: nodes (`hints.forNodes`). */
  nodeHints?: string[];
}

/** This node, as far as the proxier cares. */
export interface NodeInfo {
  /** The node's name. */
  name: string;
  /** The node's labels (the topology zone). */
  labels: Record<string, string>;
  /** The node's primary IPs (InternalIP, else ExternalIP), any family. */
  ips: string[];
  /** The node's pod CIDRs. */
  podCIDRs: string[];
}

/** How "local" (pod) traffic is recognised, as kube-proxy's --detect-local-mode. */
export type LocalDetector =
  | { mode: "ClusterCIDR"; cidrs: string[] }
  | { mode: "NodeCIDR" }
  | { mode: "BridgeInterface"; interface: string }
  | { mode: "InterfaceNamePrefix"; prefix: string }
  | { mode: "None" };

/** Proxier settings that shape the rules. */
export interface ProxierConfig {
  /** Masquerade all Service traffic (--masquerade-all). */
  masqueradeAll: boolean;
  /** Bit of the packet mark used to flag masquerade (0-31, default 14). */
  masqueradeBit: number;
  /** How pod traffic is recognised. */
  localDetector: LocalDetector;
  /** CIDRs and the keywords "primary", "localhost", "all" (net/nodeport_addresses.ts); [] = primary. */
  nodePortAddresses: string[];
  /** Families whose loopback NodePorts the userspace proxy serves (rules reject UDP/SCTP there). */
  localhostNodePorts?: readonly IpFamily[];
}

/** The complete input for building one family's ruleset. */
export interface ProxyState {
  /** The family of the ruleset. */
  family: IpFamily;
  /** By ServicePortInfo.id. */
  services: ReadonlyMap<string, ServicePortInfo>;
  /** By ServicePortInfo.id. Missing means no endpoints. */
  endpoints: ReadonlyMap<string, readonly EndpointInfo[]>;
  /** This node. */
  node: NodeInfo;
  /** ServiceCIDRs of this family. */
  serviceCIDRs: string[];
}

/**
 * What a sync changed that conntrack cleanup needs. Filled in by the change
 * trackers when their changes are applied; consumed after the transaction
 * committed.
 */
export interface StaleReport {
  /** UDP/SCTP service ports that went from no endpoints to some: flush entries to their frontends. */
  servicesWithNewEndpoints: ServicePortInfo[];
  /** Endpoints that went away (or stopped serving), with the service port they belonged to. */
  deletedEndpoints: { service: ServicePortInfo; ip: string; port: number }[];
  /**
   * UDP service ports that are gone (Service deleted, port removed, or no longer UDP), as they
   * were: every UDP flow to their frontend IP:ports and NodePort goes (upstream #141371, 1.38).
   * Frontends and NodePorts a current UDP service port claims are already taken out.
   * Omitted: none.
   */
  deletedServices?: ServicePortInfo[];
}

/** A report with nothing in it. */
export function emptyStaleReport(): StaleReport {
  return { servicesWithNewEndpoints: [], deletedEndpoints: [], deletedServices: [] };
}

/** Adds `r`'s entries to `into` (conntrack work carried across syncs). */
export function mergeStaleReport(into: StaleReport, r: StaleReport): void {
  into.servicesWithNewEndpoints.push(...r.servicesWithNewEndpoints);
  into.deletedEndpoints.push(...r.deletedEndpoints);
  if (r.deletedServices?.length) (into.deletedServices ??= []).push(...r.deletedServices);
}
