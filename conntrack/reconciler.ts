/**
 * The conntrack reconciler: compares the UDP conntrack table of one family
 * with the desired state and deletes the flows that contradict it. UDP has no
 * teardown, so a flow DNATed to an endpoint that is gone keeps blackholing a
 * client that reuses its source port until the flow is deleted.
 *
 * Only flows that are provably stale go; nothing is flushed wholesale, so a
 * restart of the proxy does not disturb healthy flows.
 *
 * @module
 */

import type { ConntrackClient, ConntrackEntry } from "../ffi/conntrack/types.ts";
import type { IpFamily } from "../net/family.ts";
import { PROTO_UDP } from "../ffi/conntrack/types.ts";
import type { ProxyState } from "../proxier/model.ts";
import { cidrContains } from "../net/cidr.ts";
import { parseIP } from "../net/ip.ts";
import { buildFrontendIndex, type FrontendIndex, type IndexOptions } from "./frontend_index.ts";

export {
  buildFrontendIndex,
  type FrontendIndex,
  type IndexOptions,
  mustCanonical,
} from "./frontend_index.ts";

/** Why an entry was judged stale. */
export type StaleReason =
  | "frontend-wrong-endpoint"
  | "frontend-no-endpoints"
  | "nodeport-wrong-endpoint"
  | "nodeport-no-endpoints"
  | "deleted-frontend";

/** Every {@link StaleReason}, in a stable order. */
export const STALE_REASONS: readonly StaleReason[] = [
  "frontend-wrong-endpoint",
  "frontend-no-endpoints",
  "nodeport-wrong-endpoint",
  "nodeport-no-endpoints",
  "deleted-frontend",
];

/**
 * Judges one UDP entry of the index's family. Returns why it is stale, or
 * undefined to keep it. O(1) except for the ServiceCIDR test of DNATed
 * flows that hit no current frontend (O(number of ranges)).
 */
export function staleReason(
  index: FrontendIndex,
  e: Readonly<ConntrackEntry>,
): StaleReason | undefined {
  // The reply source differs from the original destination only when the flow was DNATed.
  const dnated = e.replySrc !== e.origDst;
  const eps = index.frontends.get(e.origDst)?.get(e.origDport);
  if (eps !== undefined) {
    // To a ClusterIP / ExternalIP / LB IP frontend, answered by something that is not a
    // serving endpoint: a former endpoint, or the frontend itself (the flow was created
    // before the DNAT rules existed and never got translated).
    if (eps.size > 0) return eps.has(e.replySrc) ? undefined : "frontend-wrong-endpoint";
    // Service scaled to zero (upstream #139629): flows still DNATed to a former endpoint
    // bypass the reject rule. Untranslated flows are left for the newly-active cleanup.
    return dnated ? "frontend-no-endpoints" : undefined;
  }
  // A flow to a frontend IP:port is never judged by the NodePort rules: a NodePort number may
  // equal another service's port, and that service's flows are not NodePort traffic.
  const npEps = index.nodePorts.get(e.origDport);
  if (npEps !== undefined && (index.nodePortIPs === null || index.nodePortIPs.has(e.origDst))) {
    // To a NodePort, answered by something that is not a serving endpoint.
    if (npEps.size > 0) return npEps.has(e.replySrc) ? undefined : "nodeport-wrong-endpoint";
    // NodePort of a service scaled to zero: only DNATed flows go, as above.
    return dnated ? "nodeport-no-endpoints" : undefined;
  }
  // Deleted service or port (upstream #141371): a DNATed flow into the service range (or
  // to a current ClusterIP) on an IP:port that is no longer a UDP frontend.
  if (!dnated) return undefined;
  if (index.clusterIPs.has(e.origDst)) return "deleted-frontend";
  if (index.serviceRanges.length > 0) {
    const dst = parseIP(e.origDst);
    if (dst !== null) {
      for (const r of index.serviceRanges) if (cidrContains(r, dst)) return "deleted-frontend";
    }
  }
  return undefined;
}

/** Options for {@link reconcile}. */
export interface ReconcileOptions extends IndexOptions {
  /** Entries per delete call (bounds each netlink batch). Default 5000. */
  chunkSize?: number;
  /** Receives one-line progress/error messages. */
  log?: (msg: string) => void;
}

/** What a reconcile did. */
export interface ReconcileResult {
  /** Entries the kernel deleted. */
  deleted: number;
  /** Entries seen by the dump. */
  scanned: number;
  /** Entries judged stale. */
  stale: number;
  /** Stale entries that were gone by the time of the delete (ENOENT). */
  alreadyGone: number;
  /** Stale entries whose delete failed for another reason. */
  errors: number;
  /** The dump was cut short; the entries seen were still acted on. */
  interrupted: boolean;
  /** Wall time of the reconcile, dump and deletes, in seconds. */
  seconds: number;
  /** Stale entries per reason. */
  byReason: Record<StaleReason, number>;
}

/** Copies what a delete needs out of the (reused) dump object. */
function copyEntry(e: Readonly<ConntrackEntry>): ConntrackEntry {
  return {
    family: e.family,
    proto: e.proto,
    origSrc: e.origSrc,
    origDst: e.origDst,
    origSport: e.origSport,
    origDport: e.origDport,
    replySrc: e.replySrc,
    replyDst: e.replyDst,
    replySport: e.replySport,
    replyDport: e.replyDport,
    mark: e.mark,
    zone: e.zone,
    id: e.id,
  };
}

/**
 * Deletes `entries` in chunks, folding the outcome into counters. ENOENT
 * (already expired or deleted) is not an error.
 */
export function deleteInChunks(
  client: ConntrackClient,
  entries: readonly ConntrackEntry[],
  chunkSize: number,
  log?: (msg: string) => void,
): { deleted: number; alreadyGone: number; errors: number } {
  if (!(chunkSize >= 1)) {
    throw new Error(`conntrack delete chunk size must be >= 1, got ${chunkSize}`);
  }
  let deleted = 0, alreadyGone = 0, errors = 0;
  let firstError: string | undefined;
  for (let i = 0; i < entries.length; i += chunkSize) {
    const res = client.delete(entries.slice(i, i + chunkSize));
    deleted += res.deleted;
    for (const f of res.failed) {
      if (/ENOENT/i.test(f.error)) alreadyGone++;
      else {
        errors++;
        firstError ??= `${f.entry.origSrc}:${f.entry.origSport} -> ` +
          `${f.entry.origDst}:${f.entry.origDport}: ${f.error}`;
      }
    }
  }
  if (errors > 0) log?.(`conntrack: ${errors} deletes failed, first: ${firstError}`);
  return { deleted, alreadyGone, errors };
}

/** Runs one reconcile pass with a prebuilt index (the Worker entry point uses this). */
export function reconcileWithIndex(
  client: ConntrackClient,
  index: FrontendIndex,
  opts: Omit<ReconcileOptions, keyof IndexOptions> = {},
): ReconcileResult {
  const start = performance.now();
  const byReason = Object.fromEntries(STALE_REASONS.map((r) => [r, 0])) as Record<
    StaleReason,
    number
  >;
  const doomed: ConntrackEntry[] = [];
  // Nothing can be stale without UDP frontends or ranges: skip the dump entirely.
  const anything = index.frontends.size > 0 || index.nodePorts.size > 0 ||
    index.serviceRanges.length > 0 || index.clusterIPs.size > 0;
  const dump = anything
    ? client.dump(index.family, (e) => {
      if (e.proto !== PROTO_UDP) return;
      const why = staleReason(index, e);
      if (why === undefined) return;
      byReason[why]++;
      doomed.push(copyEntry(e));
    }, PROTO_UDP)
    : { count: 0, interrupted: false };
  if (dump.interrupted) {
    opts.log?.(
      `conntrack: IPv${index.family} dump interrupted after ${dump.count} entries; ` +
        `cleaning what was seen`,
    );
  }
  const del = deleteInChunks(client, doomed, opts.chunkSize ?? 5000, opts.log);
  return {
    ...del,
    scanned: dump.count,
    stale: doomed.length,
    interrupted: dump.interrupted,
    seconds: (performance.now() - start) / 1000,
    byReason,
  };
}

/**
 * Reconciles the UDP conntrack flows of one family with `state`: dumps them
 * (streaming, keeping only the stale ones), then deletes the stale ones in
 * chunks. An interrupted dump is still acted on. Runs synchronously on the
 * calling thread; see worker.ts to keep the event loop free.
 *
 * Call it only once Services and EndpointSlices have synced: a service whose
 * endpoints are not known yet looks scaled to zero, and its DNATed flows
 * would go.
 */
export function reconcile(
  client: ConntrackClient,
  family: IpFamily,
  state: ProxyState,
  opts: ReconcileOptions = {},
): ReconcileResult {
  if (state.family !== family) {
    throw new Error(`reconcile: state is for IPv${state.family} but IPv${family} was asked for`);
  }
  return reconcileWithIndex(client, buildFrontendIndex(state, opts), opts);
}
