/**
 * Endpoint selection for one service port: which endpoints cluster-wide
 * traffic may use and which local-policy traffic may use, following
 * Kubernetes' semantics (ready endpoints first, serving+terminating ones as
 * a fallback, topology hints, internal/external traffic policy Local).
 *
 * @module
 */
import type { EndpointInfo, NodeInfo, ServicePortInfo } from "./model.ts";

/** Node label holding the node's zone. */
export const ZONE_LABEL = "topology.kubernetes.io/zone";

/** Result of {@link categorizeEndpoints}. */
export interface CategorizedEndpoints {
  /** Endpoints for traffic with cluster policy, or [] when the service uses none. */
  clusterEndpoints: EndpointInfo[];
  /** Local endpoints for traffic with Local policy, or [] when the service uses none. */
  localEndpoints: EndpointInfo[];
  /** Union of the two (each endpoint once): everything any traffic may reach. */
  allReachableEndpoints: EndpointInfo[];
  /** Some endpoint anywhere can serve (decides REJECT vs DROP when a policy has none). */
  hasAnyEndpoints: boolean;
  /** Which topology hints were applied to cluster endpoints. */
  topology: "none" | "zone" | "node";
}

/** The service is reachable from outside: NodePort, externalIPs or LoadBalancer IPs. */
export function externallyAccessible(svc: ServicePortInfo): boolean {
  return svc.nodePort > 0 || svc.externalIPs.length > 0 || svc.loadBalancerIPs.length > 0;
}

/**
 * Some traffic to the service uses cluster-wide endpoints: ClusterIP traffic under policy
 * Cluster, and any external traffic, since even under externalTrafficPolicy Local pods and the
 * node itself are short-circuited to every endpoint (upstream's UsesClusterEndpoints).
 */
export function usesClusterEndpoints(svc: ServicePortInfo): boolean {
  return !svc.internalPolicyLocal || externallyAccessible(svc);
}

/** Some traffic to the service is restricted to local endpoints. */
export function usesLocalEndpoints(svc: ServicePortInfo): boolean {
  return svc.internalPolicyLocal || (externallyAccessible(svc) && svc.externalPolicyLocal);
}

/**
 * Decides which topology hints apply. Node hints win when every ready
 * endpoint has node hints and one names this node; otherwise zone hints
 * apply when every ready endpoint has zone hints and one names this node's
 * zone. Anything less means hints are ignored (all endpoints usable), so a
 * partially hinted slice never black-holes traffic.
 */
export function topologyMode(
  endpoints: readonly EndpointInfo[],
  node: NodeInfo,
): "none" | "zone" | "node" {
  const zone = node.labels[ZONE_LABEL] ?? "";
  let allNode = true, forNode = false, allZone = true, forZone = false, anyReady = false;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    anyReady = true;
    if (!ep.nodeHints || ep.nodeHints.length === 0) allNode = false;
    else if (ep.nodeHints.includes(node.name)) forNode = true;
    if (!ep.zoneHints || ep.zoneHints.length === 0) allZone = false;
    else if (zone !== "" && ep.zoneHints.includes(zone)) forZone = true;
  }
  if (!anyReady) return "none";
  if (allNode && forNode) return "node";
  if (allZone && forZone) return "zone";
  return "none";
}

function fitsTopology(ep: EndpointInfo, mode: "none" | "zone" | "node", node: NodeInfo): boolean {
  if (mode === "node") return ep.nodeHints?.includes(node.name) ?? false;
  if (mode === "zone") return ep.zoneHints?.includes(node.labels[ZONE_LABEL] ?? "") ?? false;
  return true;
}

/**
 * Splits a service port's endpoints into those cluster-policy traffic may
 * use and those Local-policy traffic may use.
 *
 * Cluster: ready endpoints (filtered by topology hints), else all
 * serving+terminating ones. Local: local ready endpoints, else local
 * serving+terminating ones. Each list is empty when no traffic of the
 * service uses that policy.
 */
export function categorizeEndpoints(
  svc: ServicePortInfo,
  endpoints: readonly EndpointInfo[],
  node: NodeInfo,
): CategorizedEndpoints {
  let clusterEndpoints: EndpointInfo[] = [];
  let localEndpoints: EndpointInfo[] = [];
  let hasAnyEndpoints = false;
  let topology: "none" | "zone" | "node" = "none";
  const cluster = usesClusterEndpoints(svc);
  const local = usesLocalEndpoints(svc);

  if (cluster) {
    topology = topologyMode(endpoints, node);
    clusterEndpoints = endpoints.filter((ep) => ep.ready && fitsTopology(ep, topology, node));
    if (clusterEndpoints.length === 0) {
      clusterEndpoints = endpoints.filter((ep) => ep.serving && ep.terminating);
    }
    hasAnyEndpoints = clusterEndpoints.length > 0;
  }
  if (local) {
    let localReady = false, localTerminating = false;
    for (const ep of endpoints) {
      if (ep.ready) {
        hasAnyEndpoints = true;
        if (ep.isLocal) localReady = true;
      } else if (ep.serving && ep.terminating) {
        hasAnyEndpoints = true;
        if (ep.isLocal) localTerminating = true;
      }
    }
    if (localReady) {
      localEndpoints = endpoints.filter((ep) => ep.isLocal && ep.ready);
    } else if (localTerminating) {
      localEndpoints = endpoints.filter((ep) => ep.isLocal && ep.serving && ep.terminating);
    }
  }

  let allReachableEndpoints: EndpointInfo[];
  if (!local) allReachableEndpoints = clusterEndpoints;
  else if (!cluster) allReachableEndpoints = localEndpoints;
  else {
    // Local may hold terminating or topology-filtered endpoints that cluster lacks.
    const seen = new Set<string>();
    allReachableEndpoints = [];
    for (const ep of [...clusterEndpoints, ...localEndpoints]) {
      const k = `${ep.ip}|${ep.port}`;
      if (seen.has(k)) continue;
      seen.add(k);
      allReachableEndpoints.push(ep);
    }
  }
  return { clusterEndpoints, localEndpoints, allReachableEndpoints, hasAnyEndpoints, topology };
}
