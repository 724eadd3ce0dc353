/**
 * Event-driven conntrack cleanup run right after a sync's rules committed:
 * turns what the sync changed (a {@link StaleReport}) into filters and
 * deletes the matching UDP flows with one dump per family.
 *
 * Only UDP is cleaned: SCTP and TCP are connection oriented and tear their
 * flows down themselves (upstream settled on UDP-only, kubernetes#115299).
 * Filters are IP:port precise, so flows to a service's other ports survive.
 *
 * @module
 */

import type { ConntrackClient, ConntrackEntry } from "../ffi/conntrack/types.ts";
import type { IpFamily } from "../net/family.ts";
import { PROTO_UDP } from "../ffi/conntrack/types.ts";
import type { ServicePortInfo, StaleReport } from "../proxier/model.ts";
import { deleteInChunks, mustCanonical } from "./reconciler.ts";

/** Why a flow matched the stale filters. */
export type CleanupReason =
  | "newly-active-frontend"
  | "newly-active-nodeport"
  | "removed-endpoint"
  | "removed-endpoint-nodeport"
  | "deleted-service"
  | "deleted-service-nodeport";

/** The report of one sync, as per-entry lookups for one family. */
export interface StaleFilters {
  /** The family every lookup and the dump are for. */
  family: IpFamily;
  /** Frontend IP -> ports of services that went from no endpoints to some: flush all their flows. */
  newlyActive: Map<string, Set<number>>;
  /** NodePorts of such services. */
  newlyActiveNodePorts: Set<number>;
  /** Frontend IP -> port -> endpoint IPs that went away. */
  removed: Map<string, Map<number, Set<string>>>;
  /** NodePort -> endpoint IPs that went away. */
  removedNodePorts: Map<number, Set<string>>;
  /** Frontend IP -> ports of deleted UDP service ports: every flow goes, DNATed or not. */
  deletedFrontends: Map<string, Set<number>>;
  /** NodePorts of deleted UDP service ports. */
  deletedNodePorts: Set<number>;
  /** Addresses NodePorts are served on, or null for any (upstream's behaviour). */
  nodePortIPs: Set<string> | null;
}

/** Options for {@link staleFilters} and {@link cleanupStale}. */
export interface CleanupOptions {
  /** Restricts the NodePort filters to flows to these addresses; omitted: any destination. */
  nodePortIPs?: readonly string[];
  /** Entries per delete call. Default 5000. */
  chunkSize?: number;
  /** Receives one-line messages. */
  log?: (msg: string) => void;
}

/** What a cleanup did. */
export interface CleanupResult {
  /** Entries the kernel deleted. */
  deleted: number;
  /** Entries the dump visited (0 when there was nothing to clean and no dump ran). */
  scanned: number;
  /** Entries the filters matched (the ones a delete was sent for). */
  matched: number;
  /** Matched entries that were gone by the time of the delete (ENOENT). */
  alreadyGone: number;
  /** Matched entries whose delete failed for another reason. */
  errors: number;
  /** The dump was cut short; the periodic reconciler catches what it missed. */
  interrupted: boolean;
  /** Wall time of the whole cleanup, dump and deletes, in seconds. */
  seconds: number;
  /** Matched entries per reason. */
  byReason: Record<CleanupReason, number>;
}

function frontendIPs(svc: ServicePortInfo): string[] {
  return [svc.clusterIP, ...svc.externalIPs, ...svc.loadBalancerIPs]
    .filter((ip) => ip)
    .map((ip) => mustCanonical(ip, `frontend of ${svc.id}`));
}

function addPort(m: Map<string, Set<number>>, ip: string, port: number): void {
  let ports = m.get(ip);
  if (ports === undefined) m.set(ip, ports = new Set());
  ports.add(port);
}

function addNested(m: Map<string, Map<number, Set<string>>>, ip: string, port: number, ep: string) {
  let ports = m.get(ip);
  if (ports === undefined) m.set(ip, ports = new Map());
  let eps = ports.get(port);
  if (eps === undefined) ports.set(port, eps = new Set());
  eps.add(ep);
}

/** Builds the filters for one family from a sync's report (UDP service ports only). */
export function staleFilters(
  report: StaleReport,
  family: IpFamily,
  opts: Pick<CleanupOptions, "nodePortIPs"> = {},
): StaleFilters {
  const f: StaleFilters = {
    family,
    newlyActive: new Map(),
    newlyActiveNodePorts: new Set(),
    removed: new Map(),
    removedNodePorts: new Map(),
    deletedFrontends: new Map(),
    deletedNodePorts: new Set(),
    nodePortIPs: opts.nodePortIPs === undefined
      ? null
      : new Set(opts.nodePortIPs.map((ip) => mustCanonical(ip, "NodePort address"))),
  };
  const ours = (s: ServicePortInfo) => s.family === family && s.protocol === "UDP";
  for (const svc of report.servicesWithNewEndpoints) {
    if (!ours(svc)) continue;
    // Flows created while the service had no endpoints were never DNATed and would
    // keep bypassing the new rules: flush every flow to its frontends.
    for (const ip of frontendIPs(svc)) addPort(f.newlyActive, ip, svc.port);
    if (svc.nodePort !== 0) f.newlyActiveNodePorts.add(svc.nodePort);
  }
  for (const svc of report.deletedServices ?? []) {
    if (!ours(svc)) continue;
    // Gone for good: a flow to one of its frontends, DNATed to any endpoint (or to none),
    // would keep a client on an address that may already serve someone else.
    for (const ip of frontendIPs(svc)) addPort(f.deletedFrontends, ip, svc.port);
    if (svc.nodePort !== 0) f.deletedNodePorts.add(svc.nodePort);
  }
  for (const { service: svc, ip } of report.deletedEndpoints) {
    if (!ours(svc)) continue;
    // Flows DNATed from a frontend to the endpoint that went away.
    const ep = mustCanonical(ip, `removed endpoint of ${svc.id}`);
    for (const fip of frontendIPs(svc)) addNested(f.removed, fip, svc.port, ep);
    if (svc.nodePort !== 0) {
      let eps = f.removedNodePorts.get(svc.nodePort);
      if (eps === undefined) f.removedNodePorts.set(svc.nodePort, eps = new Set());
      eps.add(ep);
    }
  }
  return f;
}

/** Whether the filters can match anything at all. */
export function filtersEmpty(f: StaleFilters): boolean {
  return f.newlyActive.size === 0 && f.newlyActiveNodePorts.size === 0 && f.removed.size === 0 &&
    f.removedNodePorts.size === 0 && f.deletedFrontends.size === 0 && f.deletedNodePorts.size === 0;
}

/** Tests one UDP entry against the filters; returns the first matching reason. */
export function matchStale(
  f: StaleFilters,
  e: Readonly<ConntrackEntry>,
): CleanupReason | undefined {
  if (f.newlyActive.get(e.origDst)?.has(e.origDport)) return "newly-active-frontend";
  if (f.removed.get(e.origDst)?.get(e.origDport)?.has(e.replySrc)) return "removed-endpoint";
  if (f.deletedFrontends.get(e.origDst)?.has(e.origDport)) return "deleted-service";
  const local = f.nodePortIPs === null || f.nodePortIPs.has(e.origDst);
  if (!local) return undefined;
  if (f.newlyActiveNodePorts.has(e.origDport)) return "newly-active-nodeport";
  if (f.removedNodePorts.get(e.origDport)?.has(e.replySrc)) return "removed-endpoint-nodeport";
  if (f.deletedNodePorts.has(e.origDport)) return "deleted-service-nodeport";
  return undefined;
}

/**
 * Deletes the UDP flows of one family made stale by a sync: one dump,
 * filters evaluated in the visitor, matches deleted in chunks. Call it
 * after the sync's transaction committed, so no new stale flow can form.
 */
export function cleanupStale(
  client: ConntrackClient,
  report: StaleReport,
  family: IpFamily,
  opts: CleanupOptions = {},
): CleanupResult {
  const start = performance.now();
  const f = staleFilters(report, family, opts);
  const byReason: Record<CleanupReason, number> = {
    "newly-active-frontend": 0,
    "newly-active-nodeport": 0,
    "removed-endpoint": 0,
    "removed-endpoint-nodeport": 0,
    "deleted-service": 0,
    "deleted-service-nodeport": 0,
  };
  const doomed: ConntrackEntry[] = [];
  const dump = filtersEmpty(f) ? { count: 0, interrupted: false } : client.dump(family, (e) => {
    if (e.proto !== PROTO_UDP) return;
    const why = matchStale(f, e);
    if (why === undefined) return;
    byReason[why]++;
    doomed.push({ ...e });
  }, PROTO_UDP);
  if (dump.interrupted) {
    opts.log?.(
      `conntrack: IPv${family} dump interrupted after ${dump.count} entries during stale cleanup; ` +
        `the reconciler will catch the rest`,
    );
  }
  const del = deleteInChunks(client, doomed, opts.chunkSize ?? 5000, opts.log);
  return {
    ...del,
    scanned: dump.count,
    matched: doomed.length,
    interrupted: dump.interrupted,
    seconds: (performance.now() - start) / 1000,
    byReason,
  };
}
