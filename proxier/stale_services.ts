/**
 * The frontends of deleted UDP service ports, for the conntrack cleanup: upstream (1.38,
 * kubernetes#141371) deletes every UDP flow to a deleted Service's ClusterIP, externalIPs
 * and LoadBalancer IPs on its port, and to its NodePort. A frontend or NodePort that a
 * current UDP service port still claims (the same address reused in one sync, or a
 * misconfigured pair of Services) is left to that service's own rules, as upstream's
 * deleted-services pass is overwritten by the live map.
 *
 * The stored copy of upstream's pkg/proxy/conntrack/cleanup.go predates #139629 (1.37) and
 * #141371 (1.38); this follows those pull requests' descriptions and issue 20.
 *
 * @module
 */

import type { ServicePortInfo } from "./model.ts";

function frontendKey(ip: string, port: number): string {
  return `${ip}|${port}`;
}

/** The frontend IP:port keys and NodePorts of `ports` (UDP only). */
function claims(
  ports: Iterable<ServicePortInfo>,
): { frontends: Set<string>; nodePorts: Set<number> } {
  const frontends = new Set<string>();
  const nodePorts = new Set<number>();
  for (const p of ports) {
    if (p.protocol !== "UDP") continue;
    for (const ip of [p.clusterIP, ...p.externalIPs, ...p.loadBalancerIPs]) {
      if (ip) frontends.add(frontendKey(ip, p.port));
    }
    if (p.nodePort !== 0) nodePorts.add(p.nodePort);
  }
  return { frontends, nodePorts };
}

/**
 * `deleted` without the frontends and NodePorts that a port of `current` claims; a deleted
 * port left with nothing is dropped. `current` is scanned only when `deleted` is not empty
 * (a sync that deleted a UDP service port), once for all of them.
 */
export function unclaimedDeleted(
  deleted: readonly ServicePortInfo[],
  current: Iterable<ServicePortInfo>,
): ServicePortInfo[] {
  if (deleted.length === 0) return [];
  const wanted = claims(deleted);
  const taken = new Set<string>();
  const takenNodePorts = new Set<number>();
  for (const p of current) {
    if (p.protocol !== "UDP") continue;
    for (const ip of [p.clusterIP, ...p.externalIPs, ...p.loadBalancerIPs]) {
      const k = frontendKey(ip, p.port);
      if (wanted.frontends.has(k)) taken.add(k);
    }
    if (wanted.nodePorts.has(p.nodePort)) takenNodePorts.add(p.nodePort);
  }
  if (taken.size === 0 && takenNodePorts.size === 0) return [...deleted];
  const out: ServicePortInfo[] = [];
  for (const d of deleted) {
    const free = (ip: string) => ip !== "" && !taken.has(frontendKey(ip, d.port));
    const p: ServicePortInfo = {
      ...d,
      clusterIP: free(d.clusterIP) ? d.clusterIP : "",
      externalIPs: d.externalIPs.filter(free),
      loadBalancerIPs: d.loadBalancerIPs.filter(free),
      nodePort: takenNodePorts.has(d.nodePort) ? 0 : d.nodePort,
    };
    if (p.clusterIP || p.externalIPs.length || p.loadBalancerIPs.length || p.nodePort) out.push(p);
  }
  return out;
}
