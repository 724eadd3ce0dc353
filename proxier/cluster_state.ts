/**
 * The cluster as the proxier sees it: Services, EndpointSlices, this Node
 * and the ServiceCIDRs, turned into one {@link ProxyState} per IP family.
 * Watch events are recorded as they arrive; {@link ClusterState.apply}
 * folds the pending ones in, touching only the Services that changed, and
 * reports what changed for a partial sync and for conntrack cleanup.
 *
 * ```ts
 * import { ClusterState } from "./cluster_state.ts";
 *
 * const cs = new ClusterState({ nodeName: "node-1" });
 * // From the informers; add = (null, obj), delete = (obj, null):
 * cs.updateService(null, {
 *   metadata: { namespace: "ns", name: "dns" },
 *   spec: { clusterIP: "198.18.128.10", ports: [{ name: "dns", protocol: "UDP", port: 53 }] },
 * });
 * cs.updateEndpointSlice(null, {
 *   metadata: { namespace: "ns", name: "dns-x", labels: { "kubernetes.io/service-name": "dns" } },
 *   addressType: "IPv4",
 *   endpoints: [{ addresses: ["198.18.1.5"], nodeName: "node-1" }],
 *   ports: [{ name: "dns", protocol: "UDP", port: 5353 }],
 * });
 * // In the sync loop:
 * const input = cs.apply();
 * const v4 = input.families[4];
 * console.log(v4.changed, v4.state.endpoints.get("ns/dns:dns"), v4.stale.servicesWithNewEndpoints);
 * ```
 *
 * @module
 */

import { canonicalCIDR } from "../net/cidr.ts";
import { formatIP, parseIP } from "../net/ip.ts";
import type { EndpointInfo, NodeInfo, ProxyState, ServicePortInfo, StaleReport } from "./model.ts";
import { familyOfText, type IpFamily } from "../net/family.ts";
import { type EndpointSlice, type ServiceCIDR, type V1Node, type V1Service } from "./k8s_types.ts";
import { consoleLog, type LogFn } from "../net/log.ts";
import { sameStrings } from "../net/arrays.ts";
import { sameServicePort, ServiceTracker } from "./service_tracker.ts";
import { EndpointsTracker, portKey, sameEndpoints } from "./endpoints_tracker.ts";
import { unclaimedDeleted } from "./stale_services.ts";

/** What one family's sync needs from an apply. */
export interface FamilySync {
  /**
   * The family's state. Its `services` and `endpoints` maps are the live,
   * incrementally maintained maps: callers must not mutate them, and they
   * change at the next `apply()`.
   */
  state: ProxyState;
  /** Service port ids present now whose ServicePortInfo or endpoints changed since the last apply. */
  changed: Set<string>;
  /** Service port ids that existed at the last apply and are gone now (disjoint from `changed`). */
  deleted: Set<string>;
  /** Conntrack work made necessary by this apply. */
  stale: StaleReport;
}

/** Result of {@link ClusterState.apply}. */
export interface SyncInput {
  /** Indexed by family: `families[4]`, `families[6]`. */
  families: Record<IpFamily, FamilySync>;
  /** This node's labels, primary IPs or podCIDRs changed: do a full sync. */
  nodeChanged: boolean;
  /** The ServiceCIDRs changed (affects the cluster-ips-check rules): do a full sync. */
  serviceCIDRsChanged: boolean;
  /**
   * `endpoints.kubernetes.io/last-change-trigger-time` of the slice changes
   * applied (ms since epoch, only those after this ClusterState was made):
   * observe `now - t` into the network programming latency histogram once the
   * sync has committed.
   */
  triggerTimes: number[];
}

/** Settings of a {@link ClusterState}. */
export interface ClusterStateOptions {
  /** This node's name: endpoints on it are local, and only its Node object is read. */
  nodeName: string;
  /** Addresses (kube-proxy's --bind-address) that replace the Node's primary IP of their family. */
  bindAddress?: string[];
  /** Program Services' externalIPs (feature gate AllowServiceExternalIPs; default true). */
  externalIPs?: boolean;
  /** Logger (default: the console). */
  log?: LogFn;
  /** Trigger times before this (ms since epoch) are not reported; defaults to construction time. */
  startTime?: number;
}

function isStaleProtocol(p: ServicePortInfo): boolean {
  return p.protocol === "UDP" || p.protocol === "SCTP";
}

function sameNode(a: NodeInfo, b: NodeInfo): boolean {
  const la = Object.keys(a.labels).sort();
  const lb = Object.keys(b.labels).sort();
  return a.name === b.name && sameStrings(a.ips, b.ips) && sameStrings(a.podCIDRs, b.podCIDRs) &&
    sameStrings(la, lb) && la.every((k) => a.labels[k] === b.labels[k]);
}

/** Holds both change trackers, the Node and the ServiceCIDRs. */
export class ClusterState {
  /** Service change tracker (also reachable through {@link updateService}). */
  readonly services: ServiceTracker;
  /** EndpointSlice change tracker (also reachable through {@link updateEndpointSlice}). */
  readonly endpoints: EndpointsTracker;

  #log: LogFn;
  #nodeName: string;
  #bind: Partial<Record<IpFamily, string>> = {};

  #svcMaps: Record<IpFamily, Map<string, ServicePortInfo>> = { 4: new Map(), 6: new Map() };
  #epMaps: Record<IpFamily, Map<string, readonly EndpointInfo[]>> = { 4: new Map(), 6: new Map() };

  #node: NodeInfo;
  #pendingNode: NodeInfo | undefined;
  #cidrObjects = new Map<string, string[]>();
  #cidrsDirty = true;
  #cidrs: Record<IpFamily, string[]> = { 4: [], 6: [] };

  /**
   * An empty cluster state for this node.
   * @throws Error when `bindAddress` holds an invalid value.
   */
  constructor(opts: ClusterStateOptions) {
    if (typeof opts.nodeName !== "string" || opts.nodeName === "") {
      throw new Error("ClusterState: nodeName must be this node's name (non-empty)");
    }
    this.#log = opts.log ?? consoleLog;
    this.#nodeName = opts.nodeName;
    for (const a of opts.bindAddress ?? []) {
      const ip = parseIP(a);
      if (!ip) throw new Error(`bind address ${JSON.stringify(a)} is not an IPv4 or IPv6 address`);
      // The unspecified address means "no override", as kube-proxy's default 0.0.0.0.
      if (ip.bytes.every((b) => b === 0)) continue;
      this.#bind[ip.family] = formatIP(ip);
    }
    this.services = new ServiceTracker(this.#log, { externalIPs: opts.externalIPs });
    this.endpoints = new EndpointsTracker(opts.nodeName, this.#log, opts.startTime);
    this.#node = this.#nodeInfo(null);
  }

  /** Records a Service add (prev null), update or delete (cur null). */
  updateService(prev: V1Service | null, cur: V1Service | null): boolean {
    return this.services.update(prev, cur);
  }

  /** Records an EndpointSlice add (prev null), update or delete (cur null). */
  updateEndpointSlice(prev: EndpointSlice | null, cur: EndpointSlice | null): boolean {
    return this.endpoints.update(prev, cur);
  }

  /**
   * Records this node's Node object (null when deleted). Objects of other
   * nodes are ignored. Returns whether it changed what the proxier uses.
   */
  updateNode(node: V1Node | null): boolean {
    if (node && node.metadata?.name !== this.#nodeName) {
      this.#log(
        "warn",
        `ignoring Node ${JSON.stringify(node.metadata?.name)}: this is node ${
          JSON.stringify(this.#nodeName)
        }`,
        {
          node: node.metadata?.name,
          expected: this.#nodeName,
        },
      );
      return false;
    }
    const info = this.#nodeInfo(node);
    const base = this.#pendingNode ?? this.#node;
    if (sameNode(base, info)) return false;
    this.#pendingNode = sameNode(this.#node, info) ? undefined : info;
    return true;
  }

  #nodeInfo(node: V1Node | null): NodeInfo {
    const key = `node ${this.#nodeName}`;
    const labels = { ...(node?.metadata?.labels ?? {}) };
    // Primary IPs: first InternalIP per family, else first ExternalIP; the
    // overall first address's family leads, as upstream's GetNodeHostIPs.
    const byFamily: Partial<Record<IpFamily, string>> = {};
    const order: IpFamily[] = [];
    for (const type of ["InternalIP", "ExternalIP"]) {
      for (const a of node?.status?.addresses ?? []) {
        if (a?.type !== type) continue;
        const ip = typeof a.address === "string" ? parseIP(a.address) : null;
        if (!ip) {
          this.#log(
            "warn",
            `${key}: ignoring status.addresses ${type} ${
              JSON.stringify(a.address)
            }: not an IP address`,
            {
              node: this.#nodeName,
              field: "status.addresses",
              value: a.address,
              expected: "an IPv4 or IPv6 address",
            },
          );
          continue;
        }
        if (byFamily[ip.family] === undefined) {
          byFamily[ip.family] = formatIP(ip);
          order.push(ip.family);
        }
      }
    }
    for (const fam of [4, 6] as const) {
      if (this.#bind[fam] === undefined) continue;
      if (byFamily[fam] === undefined) order.push(fam);
      byFamily[fam] = this.#bind[fam];
    }
    const ips = order.map((f) => byFamily[f]!);
    const rawCIDRs = node?.spec?.podCIDRs?.length
      ? node.spec.podCIDRs
      : node?.spec?.podCIDR
      ? [node.spec.podCIDR]
      : [];
    const podCIDRs: string[] = [];
    for (const c of rawCIDRs) {
      const cidr = typeof c === "string" ? canonicalCIDR(c) : null;
      if (!cidr) {
        this.#log("warn", `${key}: ignoring spec.podCIDRs value ${JSON.stringify(c)}: not a CIDR`, {
          node: this.#nodeName,
          field: "spec.podCIDRs",
          value: c,
          expected: "a CIDR such as 198.18.0.0/24",
        });
        continue;
      }
      if (!podCIDRs.includes(cidr)) podCIDRs.push(cidr);
    }
    return { name: this.#nodeName, labels, ips, podCIDRs };
  }

  /** Records a ServiceCIDR add (prev null), update or delete (cur null). */
  updateServiceCIDR(prev: ServiceCIDR | null, cur: ServiceCIDR | null): boolean {
    const name = cur?.metadata?.name ?? prev?.metadata?.name;
    if (!name) {
      this.#log("error", "ignoring ServiceCIDR without metadata.name", {});
      return false;
    }
    const before = this.#cidrObjects.get(name);
    if (!cur) {
      if (!before) return false;
      this.#cidrObjects.delete(name);
      this.#cidrsDirty = true;
      return true;
    }
    const cidrs: string[] = [];
    for (const c of cur.spec?.cidrs ?? []) {
      const cidr = typeof c === "string" ? canonicalCIDR(c) : null;
      if (!cidr) {
        this.#log(
          "warn",
          `servicecidr ${name}: ignoring spec.cidrs value ${JSON.stringify(c)}: not a CIDR`,
          {
            serviceCIDR: name,
            field: "spec.cidrs",
            value: c,
            expected: "a CIDR such as 198.18.0.0/16",
          },
        );
        continue;
      }
      cidrs.push(cidr);
    }
    if (before && sameStrings(before, cidrs)) return false;
    this.#cidrObjects.set(name, cidrs);
    this.#cidrsDirty = true;
    return true;
  }

  /** Services with changes not yet applied (for the pending-changes metric). */
  get pendingServiceChanges(): number {
    return this.services.pendingCount;
  }

  /** EndpointSlices with changes not yet applied (for the pending-changes metric). */
  get pendingEndpointChanges(): number {
    return this.endpoints.pendingCount;
  }

  /** Whether anything was recorded since the last apply. */
  hasPendingChanges(): boolean {
    return this.services.pendingCount > 0 || this.endpoints.pendingCount > 0 ||
      this.#pendingNode !== undefined || this.#cidrsDirty;
  }

  /** The family's state as of the last apply (live maps: do not mutate). */
  state(family: IpFamily): ProxyState {
    return {
      family,
      services: this.#svcMaps[family],
      endpoints: this.#epMaps[family],
      node: this.#node,
      serviceCIDRs: this.#cidrs[family],
    };
  }

  /**
   * Applies everything recorded since the last call. Cost follows the
   * number of changed Services, not the cluster size.
   */
  apply(): SyncInput {
    const svcChanges = this.services.checkout();
    const epChanged = this.endpoints.checkoutServices();
    const fam = (): Omit<FamilySync, "state"> => ({
      changed: new Set(),
      deleted: new Set(),
      stale: { servicesWithNewEndpoints: [], deletedEndpoints: [], deletedServices: [] },
    });
    const families: Record<IpFamily, Omit<FamilySync, "state">> = { 4: fam(), 6: fam() };

    // A Service's endpoints are read from the tracker as they are now, changed or not.
    for (const [key, sc] of svcChanges) this.#applyService(families, key, sc.previous, sc.current);
    for (const key of epChanged) {
      if (svcChanges.has(key)) continue;
      const ports = this.services.ports(key);
      this.#applyService(families, key, ports, ports);
    }

    for (const f of [4, 6] as const) {
      const st = families[f].stale;
      st.deletedServices = unclaimedDeleted(st.deletedServices!, this.#svcMaps[f].values());
    }

    let nodeChanged = false;
    if (this.#pendingNode) {
      nodeChanged = !sameNode(this.#node, this.#pendingNode);
      this.#node = this.#pendingNode;
      this.#pendingNode = undefined;
    }
    let serviceCIDRsChanged = false;
    if (this.#cidrsDirty) {
      this.#cidrsDirty = false;
      const next: Record<IpFamily, string[]> = { 4: [], 6: [] };
      for (const list of this.#cidrObjects.values()) {
        for (const c of list) {
          const f = familyOfText(c);
          if (!next[f].includes(c)) next[f].push(c);
        }
      }
      for (const f of [4, 6] as const) {
        next[f].sort();
        if (!sameStrings(next[f], this.#cidrs[f])) serviceCIDRsChanged = true;
      }
      this.#cidrs = next;
    }
    return {
      families: {
        4: { state: this.state(4), ...families[4] },
        6: { state: this.state(6), ...families[6] },
      },
      nodeChanged,
      serviceCIDRsChanged,
      triggerTimes: this.endpoints.checkoutTriggerTimes(),
    };
  }

  /**
   * Moves Service `key` from `oldPorts` to `newPorts` with its current endpoints, recording what
   * changed.
   */
  #applyService(
    families: Record<IpFamily, Omit<FamilySync, "state">>,
    key: string,
    oldPorts: readonly ServicePortInfo[],
    newPorts: readonly ServicePortInfo[],
  ) {
    // Ports are few per Service: a scan, not a Map, finds the ones gone.
    for (const p of oldPorts) {
      if (!newPorts.some((q) => q.family === p.family && q.id === p.id)) {
        this.#applyPort(families[p.family], p.family, p.id, undefined, undefined);
      }
    }
    for (const p of newPorts) {
      const list = this.endpoints.portEndpoints(key, portKey(p.family, p.portName, p.protocol));
      this.#applyPort(families[p.family], p.family, p.id, p, list);
    }
  }

  /** Moves one service port of one family to its new value, recording what changed. */
  #applyPort(
    out: Omit<FamilySync, "state">,
    family: IpFamily,
    id: string,
    svc: ServicePortInfo | undefined,
    eps: readonly EndpointInfo[] | undefined,
  ) {
    const svcMap = this.#svcMaps[family];
    const epMap = this.#epMaps[family];
    const oldSvc = svcMap.get(id);
    const oldEps = epMap.get(id);
    if (!svc) eps = undefined;
    if (eps && eps.length === 0) eps = undefined;
    const svcSame = sameServicePort(oldSvc, svc);
    const epsSame = sameEndpoints(oldEps, eps);
    if (svcSame && epsSame) return;

    if (svc) svcMap.set(id, svc);
    else svcMap.delete(id);
    if (eps) epMap.set(id, eps);
    else epMap.delete(id);
    if (!svc) {
      if (oldSvc) out.deleted.add(id);
      if (out.changed.size > 0) out.changed.delete(id);
    } else {
      out.changed.add(id);
      if (out.deleted.size > 0) out.deleted.delete(id);
    }

    // Conntrack: flows to endpoints that no longer serve must go; a UDP/SCTP
    // service that had no serving endpoint may have blackholed flows cached.
    if (oldSvc && isStaleProtocol(oldSvc)) {
      // A set keeps this linear for services with thousands of endpoints.
      const serving = new Set<string>();
      if (svc) { for (const n of eps ?? []) if (n.serving) serving.add(`${n.ip}|${n.port}`); }
      for (const e of oldEps ?? []) {
        if (e.serving && !serving.has(`${e.ip}|${e.port}`)) {
          out.stale.deletedEndpoints.push({ service: oldSvc, ip: e.ip, port: e.port });
        }
      }
    }
    // A UDP port gone (or no longer UDP): every flow to its frontends goes, not only those
    // DNATed to an endpoint that served until now (upstream #141371).
    if (oldSvc?.protocol === "UDP" && svc?.protocol !== "UDP") {
      out.stale.deletedServices!.push(oldSvc);
    }
    if (svc && isStaleProtocol(svc) && eps?.some((e) => e.serving)) {
      // A protocol change counts as "had none": the old endpoints served another protocol.
      const hadServing = oldSvc?.protocol === svc.protocol &&
        (oldEps?.some((e) => e.serving) ?? false);
      if (!hadServing) out.stale.servicesWithNewEndpoints.push(svc);
    }
  }
}
