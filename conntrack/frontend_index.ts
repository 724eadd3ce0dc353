/**
 * The reconcile's frontend index, kept per service port so it can follow the syncs.
 *
 * Building the whole index from the proxy state is O(Services) (every ClusterIP parsed and
 * canonicalised) and, posted to the Worker, O(Services) again to clone: at 60k Services that
 * blocked the event loop for half a second every reconcile period. Instead the main thread
 * computes the entries of the service ports a sync changed ({@link indexUpdate}) and posts
 * them; the Worker keeps every family's entries ({@link IndexEntries}) and builds the index
 * there, off the event loop, when a reconcile runs.
 *
 * @module
 */
import type { IpFamily } from "../net/family.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../proxier/model.ts";
import { cidrContains, parseCIDR, type ParsedCIDR } from "../net/cidr.ts";
import { canonicalIP, canonicalText, type ParsedIP, parseIP } from "../net/ip.ts";

/** Canonical text of a model address; throws naming the field when it is malformed. */
export function mustCanonical(ip: string, what: string): string {
  const c = canonicalIP(ip);
  if (c === null) {
    throw new Error(`conntrack reconcile: ${what} ${JSON.stringify(ip)} is not an IP address`);
  }
  return c;
}

function mustCidr(s: string): ParsedCIDR {
  const c = parseCIDR(s);
  if (c === null) {
    throw new Error(
      `conntrack reconcile: ServiceCIDR ${
        JSON.stringify(s)
      } is not a CIDR (want e.g. 198.18.0.0/16)`,
    );
  }
  return c;
}

/**
 * The desired state reduced to what the per-entry test needs, built once per
 * reconcile. Plain Maps/Sets/arrays only, so it can be posted to a Worker (tests do; the
 * agent posts {@link IndexUpdate}s and the Worker builds the index itself).
 */
export interface FrontendIndex {
  /** The family of every address in the index. */
  family: IpFamily;
  /** Frontend IP -> port -> serving endpoint IPs (empty: the service has none). UDP only. */
  frontends: Map<string, Map<number, Set<string>>>;
  /** NodePort -> serving endpoint IPs. UDP only. */
  nodePorts: Map<number, Set<string>>;
  /** Local IPs NodePorts are served on, or null for any destination (upstream's behaviour). */
  nodePortIPs: Set<string> | null;
  /** ServiceCIDRs of the family. */
  serviceRanges: ParsedCIDR[];
  /** Current ClusterIPs of any protocol (service space even without ServiceCIDRs). */
  clusterIPs: Set<string>;
}

/** Options shaping the index. */
export interface IndexOptions {
  /**
   * Restricts the NodePort rules to flows whose original destination is one of
   * these addresses (the node IPs NodePorts are accepted on). Omitted: any
   * destination, as upstream does.
   */
  nodePortIPs?: readonly string[];
}

function mergeInto<K>(m: Map<K, Set<string>>, key: K, ips: readonly string[]): void {
  const have = m.get(key);
  // Two services claiming one frontend is a misconfiguration; the union avoids deleting good flows.
  if (have === undefined) m.set(key, new Set(ips));
  else for (const ip of ips) have.add(ip);
}

/**
 * The index of `family` over service port entries (see {@link indexEntry}); a frontend two
 * ports claim gets the union of their endpoints.
 */
export function indexFrom(
  family: IpFamily,
  entries: Iterable<IndexEntry>,
  serviceCIDRs: readonly string[],
  opts: IndexOptions = {},
): FrontendIndex {
  const frontends = new Map<string, Map<number, Set<string>>>();
  const nodePorts = new Map<number, Set<string>>();
  const clusterIPs = new Set<string>();
  for (const e of entries) {
    if (e.clusterIP) clusterIPs.add(e.clusterIP);
    if (e.udp === undefined) continue;
    const { ips, port, nodePort, eps } = e.udp;
    for (const ip of ips) {
      let ports = frontends.get(ip);
      if (ports === undefined) frontends.set(ip, ports = new Map());
      mergeInto(ports, port, eps);
    }
    if (nodePort !== 0) mergeInto(nodePorts, nodePort, eps);
  }
  const nodePortIPs = opts.nodePortIPs === undefined
    ? null
    : new Set(opts.nodePortIPs.map((ip) => mustCanonical(ip, "NodePort address")));
  const serviceRanges = serviceCIDRs.map(mustCidr);
  return { family, frontends, nodePorts, nodePortIPs, serviceRanges, clusterIPs };
}

/** Builds the lookup index for one family from the whole proxy state: O(Services). */
export function buildFrontendIndex(state: ProxyState, opts: IndexOptions = {}): FrontendIndex {
  const entries = indexUpdate(state).entries.flatMap(([, e]) => e === null ? [] : [e]);
  return indexFrom(state.family, entries, state.serviceCIDRs, opts);
}

/** One service port's share of the index: canonical addresses, validated on the main thread. */
export interface IndexEntry {
  /**
   * Its ClusterIP, service space whatever the protocol; "" for none, and for one inside the
   * ServiceCIDRs, which mark it as service space already (see {@link indexUpdate}).
   */
  clusterIP: string;
  /** UDP ports only: the frontend IPs, port, NodePort (0: none) and serving endpoint IPs. */
  udp?: { ips: string[]; port: number; nodePort: number; eps: string[] };
}

/**
 * The entry of one service port, or null when it adds nothing to the index (not UDP, and its
 * ClusterIP `inRanges`). Throws, naming the port, on an address that is not an IP.
 */
export function indexEntry(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[] = [],
  inRanges: (ip: ParsedIP) => boolean = () => false,
): IndexEntry | null {
  let clusterIP = "";
  if (svc.clusterIP) {
    // Parsed once: most ClusterIPs are in range and need no canonical text at all.
    const p = parseIP(svc.clusterIP);
    if (p === null) mustCanonical(svc.clusterIP, `ClusterIP of ${svc.id}`); // throws
    else if (!inRanges(p)) clusterIP = canonicalText(svc.clusterIP, p);
  }
  if (svc.protocol !== "UDP") return clusterIP === "" ? null : { clusterIP };
  // Serving endpoints only; traffic policy, topology and termination are ignored so that a UDP
  // flow lives exactly as long as a TCP one to the same endpoint would.
  const served = new Set<string>();
  for (const ep of eps) {
    if (ep.serving || ep.ready) served.add(mustCanonical(ep.ip, `endpoint of ${svc.id}`));
  }
  const ips = [svc.clusterIP, ...svc.externalIPs, ...svc.loadBalancerIPs]
    .filter((ip) => ip)
    .map((ip) => mustCanonical(ip, `frontend of ${svc.id}`));
  return { clusterIP, udp: { ips, port: svc.port, nodePort: svc.nodePort, eps: [...served] } };
}

/** Entries of the ports a sync changed (null: gone); `reset` replaces all of a family's. */
export interface IndexUpdate {
  /** The family whose entries change. */
  family: IpFamily;
  /** True: `entries` replace every entry of the family; false: they patch the ones kept. */
  reset: boolean;
  /** Service port id -> its entry, or null when the port is gone. */
  entries: [string, IndexEntry | null][];
}

/**
 * The update for `ids` (changed or deleted service port ids) of `state`, or with `ids`
 * undefined a reset holding every port of the state. Cost: O(ids).
 *
 * A ClusterIP inside the state's ServiceCIDRs is left out: the index's ranges already make it
 * service space, and at 60k TCP-only Services the entries would otherwise hold 15 MB for
 * nothing. An update is therefore only valid with the ServiceCIDRs it was made with: when they
 * change, post a reset (the {@link ReconcileWorker} does).
 */
export function indexUpdate(state: ProxyState, ids?: Iterable<string>): IndexUpdate {
  const ranges = state.serviceCIDRs.flatMap((c) => parseCIDR(c) ?? []);
  const inRanges = (p: ParsedIP) => ranges.some((r) => cidrContains(r, p));
  const entries: [string, IndexEntry | null][] = [];
  const entryOf = (id: string): IndexEntry | null => {
    const svc = state.services.get(id);
    if (svc === undefined || svc.family !== state.family) return null;
    return indexEntry(svc, state.endpoints.get(id), inRanges);
  };
  for (const id of ids ?? state.services.keys()) {
    const e = entryOf(id);
    // A reset only carries what adds something; an update also says what is gone.
    if (e !== null || ids !== undefined) entries.push([id, e]);
  }
  return { family: state.family, reset: ids === undefined, entries };
}

/** Every family's entries, as the updates left them (the Worker's copy of the programmed state). */
export class IndexEntries {
  readonly #by = new Map<IpFamily, Map<string, IndexEntry>>();

  /** Applies an update, in the order the syncs committed them. */
  apply(u: IndexUpdate): void {
    let m = this.#by.get(u.family);
    if (m === undefined || u.reset) this.#by.set(u.family, m = new Map());
    for (const [id, e] of u.entries) {
      if (e === null) m.delete(id);
      else m.set(id, e);
    }
  }

  /** True once a reset for `family` was applied. */
  has(family: IpFamily): boolean {
    return this.#by.has(family);
  }

  /** The index of `family` over its entries. O(entries): run it off the event loop. */
  index(family: IpFamily, serviceCIDRs: readonly string[], opts: IndexOptions = {}): FrontendIndex {
    return indexFrom(family, (this.#by.get(family) ?? new Map()).values(), serviceCIDRs, opts);
  }
}
