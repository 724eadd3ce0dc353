/**
 * What one service port asks of the localhost proxy: a listener on its NodePort and the
 * endpoints a connection may go to, chosen by the same categorisation the nftables rules use
 * (proxier/categorize.ts), so the two paths agree.
 *
 * @module
 */
import { categorizeEndpoints } from "../../proxier/categorize.ts";
import type { EndpointInfo, NodeInfo, ServicePortInfo } from "../../proxier/model.ts";

/** An endpoint address. */
export interface Backend {
  /** The endpoint's IP address (the family of the listener). */
  ip: string;
  /** The endpoint's target port. */
  port: number;
}

/** One listener's wanted state. */
export interface ListenerTarget {
  /** The service port (ServicePortInfo.id). */
  id: string;
  /** The service port's NodePort, which the listener binds on loopback. */
  nodePort: number;
  /** Where connections may go; never empty. */
  backends: Backend[];
  /** ClientIP affinity timeout in seconds; 0 for none. */
  affinitySeconds: number;
}

/**
 * The listener a service port wants, or undefined for none: only TCP NodePorts get one (UDP
 * and SCTP are rejected by rules), and none while no endpoint may serve. Under
 * externalTrafficPolicy Local only this node's endpoints count (KEP-6032); otherwise the
 * cluster set, topology hints applied as for any Cluster traffic.
 */
export function listenerTarget(
  svc: ServicePortInfo,
  endpoints: readonly EndpointInfo[] | undefined,
  node: NodeInfo,
): ListenerTarget | undefined {
  if (svc.protocol !== "TCP" || svc.nodePort <= 0) return undefined;
  const cat = categorizeEndpoints(svc, endpoints ?? [], node);
  const chosen = svc.externalPolicyLocal ? cat.localEndpoints : cat.clusterEndpoints;
  if (chosen.length === 0) return undefined;
  return {
    id: svc.id,
    nodePort: svc.nodePort,
    backends: chosen.map((e) => ({ ip: e.ip, port: e.port })),
    affinitySeconds: svc.stickyMaxAgeSeconds,
  };
}
