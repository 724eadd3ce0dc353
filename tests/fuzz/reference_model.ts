/**
 * An independent reference model of what kube-proxy (nftables mode, masqueradeAll off,
 * `--detect-local-mode=ClusterCIDR`, NodePorts on the node's primary IPs) does with the first
 * packet of a new connection. It reads the Kubernetes API objects directly and shares no code
 * with the proxier: it is written from upstream's pkg/proxy (serviceport.go, topology.go,
 * endpointslicecache.go) and pkg/proxy/nftables/proxier.go, one rule at a time, for clarity
 * rather than speed. The fuzz test compares the packet tracer's reading of the programmed
 * ruleset with this function's answer.
 *
 * @module
 */

/** A Kubernetes object as JSON (only what this model reads is typed). */
// deno-lint-ignore no-explicit-any
export type Obj = Record<string, any>;

/** The cluster as API objects. */
export interface ModelWorld {
  services: Iterable<Obj>;
  slices: Iterable<Obj>;
  node: Obj;
  /** The ServiceCIDRs' ranges. */
  serviceCIDRs: string[];
}

/** The proxy's settings the model needs. */
export interface ModelConfig {
  nodeName: string;
  /** `--cluster-cidr`: sources inside are pods (not masqueraded, short-circuited). */
  clusterCIDRs: string[];
}

/** The first packet of a connection. */
export interface ModelPacket {
  src: string;
  dst: string;
  proto: "tcp" | "udp" | "sctp";
  dport: number;
  from: "offnode" | "pod" | "host";
}

/** One endpoint a DNAT may pick. */
export interface ModelTarget {
  ip: string;
  port: number;
  masquerade: boolean;
}

/** The model's answer. */
export type Expected =
  | { verdict: "DROP" | "REJECT"; why: string }
  | {
    verdict: "ACCEPT";
    why: string;
    /** Each equally likely; empty when the packet passes untranslated. */
    targets: ModelTarget[];
    /** ClientIP affinity timeout (seconds) when the service is sticky. */
    stickySeconds?: number;
    /** Which special rules decided this (for coverage figures only). */
    tags?: string[];
  };

// ---------------------------------------------------------------------------
// Addresses, as plain numbers.

interface Addr {
  v6: boolean;
  n: bigint;
}

/** Parses an IPv4 or IPv6 address (no zone, no embedded IPv4), or null. */
export function addr(s: string): Addr | null {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(s)) {
    const parts = s.split(".").map(Number);
    if (parts.some((p) => p > 255)) return null;
    return { v6: false, n: parts.reduce((a, p) => a * 256n + BigInt(p), 0n) };
  }
  if (!/^[0-9a-fA-F:]+$/.test(s)) return null;
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const words = (h: string) => (h === "" ? [] : h.split(":"));
  const head = words(halves[0]);
  const tail = halves.length === 2 ? words(halves[1]) : [];
  const fill = 8 - head.length - tail.length;
  if (halves.length === 1 ? fill !== 0 : fill < 1) return null;
  const all = [...head, ...Array(halves.length === 2 ? fill : 0).fill("0"), ...tail];
  if (all.some((w) => w.length === 0 || w.length > 4)) return null;
  return { v6: true, n: all.reduce((a, w) => a * 65536n + BigInt(parseInt(w, 16)), 0n) };
}

function sameAddr(a: string, b: string): boolean {
  const x = addr(a), y = addr(b);
  return x !== null && y !== null && x.v6 === y.v6 && x.n === y.n;
}

/** Whether `ip` lies in `cidr` (`a/len`, whitespace around it ignored, as upstream trims). */
export function inCIDR(ip: string, cidr: string): boolean {
  const [a, len] = cidr.trim().split("/");
  const net = addr(a), x = addr(ip);
  if (net === null || x === null || net.v6 !== x.v6) return false;
  const bits = net.v6 ? 128n : 32n;
  const shift = bits - BigInt(len);
  return (net.n >> shift) === (x.n >> shift);
}

const isV6 = (s: string) => addr(s)?.v6 === true;

// ---------------------------------------------------------------------------
// Services and endpoints, as upstream's trackers read them.

const ZONE_LABEL = "topology.kubernetes.io/zone";
const PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name";
const HEADLESS_LABEL = "service.kubernetes.io/headless";
const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

interface Ep {
  ip: string;
  port: number;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  local: boolean;
  zoneHints: string[];
  nodeHints: string[];
}

/** The clusterIP of the packet's family, or undefined when the Service is not proxied there. */
function clusterIPOf(svc: Obj, v6: boolean): string | undefined {
  if (svc.metadata?.labels?.[PROXY_NAME_LABEL] !== undefined) return undefined;
  if (svc.spec?.type === "ExternalName") return undefined;
  const ips: string[] = svc.spec?.clusterIPs?.length ? svc.spec.clusterIPs : [svc.spec?.clusterIP];
  if (ips[0] === "None" || !ips[0]) return undefined;
  return ips.find((ip) => isV6(ip) === v6);
}

/** Who an endpoint is (its targetRef's uid, else kind/namespace/name), or "" for nobody. */
function podOf(e: Obj): string {
  const r = e.targetRef;
  if (!r) return "";
  return r.uid ? `uid:${r.uid}` : r.name ? `${r.kind}/${r.namespace}/${r.name}` : "";
}

/** The endpoints of one Service port in one family, from every slice of the Service. */
function endpointsOf(world: ModelWorld, cfg: ModelConfig, svc: Obj, port: Obj, v6: boolean): Ep[] {
  const out: (Ep & { pod: string })[] = [];
  const mine = [...world.slices].filter((slice) => {
    const labels = slice.metadata?.labels ?? {};
    return slice.metadata?.namespace === svc.metadata.namespace &&
      labels[SERVICE_NAME_LABEL] === svc.metadata.name &&
      labels[HEADLESS_LABEL] === undefined && labels[PROXY_NAME_LABEL] === undefined &&
      slice.addressType === (v6 ? "IPv6" : "IPv4");
  });
  // A duplicate address is decided in the order the slices were written (pkg/proxy
  // endpointslicecache.go after PR #135593, see the rule below): oldest first.
  mine.sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion));
  for (const slice of mine) {
    const sp = (slice.ports ?? []).find((p: Obj) =>
      (p.name ?? "") === (port.name ?? "") && (p.protocol ?? "TCP") === (port.protocol ?? "TCP")
    );
    if (sp === undefined) continue;
    for (const e of slice.endpoints ?? []) {
      // endpointslicecache.go: a nil ready or serving means true, a nil terminating false.
      const ready = e.conditions?.ready ?? true;
      const ep = {
        ip: e.addresses[0],
        port: sp.port,
        ready,
        serving: e.conditions?.serving ?? true,
        terminating: e.conditions?.terminating ?? false,
        local: e.nodeName === cfg.nodeName,
        zoneHints: (e.hints?.forZones ?? []).map((h: Obj) => h.name),
        nodeHints: (e.hints?.forNodes ?? []).map((h: Obj) => h.name),
        pod: podOf(e),
      };
      const at = out.findIndex((o) => sameAddr(o.ip, ep.ip) && o.port === ep.port);
      if (at < 0) {
        out.push(ep);
        continue;
      }
      // The same address twice (kubernetes#135266): the same Pod moving between slices takes
      // the later copy; different Pods (a reused IP) keep a live one over a terminating one;
      // otherwise the later copy.
      const old = out[at];
      const samePod = ep.pod !== "" && ep.pod === old.pod;
      if (samePod || !ep.terminating || old.terminating) out[at] = ep;
    }
  }
  return out;
}

/** What one Service port looks like in one family. */
interface Port {
  svc: Obj;
  port: Obj;
  proto: string;
  clusterIP: string;
  externalIPs: string[];
  lbIPs: string[];
  sourceRanges: string[];
  internalLocal: boolean;
  externalLocal: boolean;
  externallyAccessible: boolean;
  sticky?: number;
}

function portsOf(svc: Obj, v6: boolean): Port[] {
  const clusterIP = clusterIPOf(svc, v6);
  if (clusterIP === undefined) return [];
  const spec = svc.spec;
  const ofFamily = (l: string[] | undefined) => (l ?? []).filter((a) => isV6(a.trim()) === v6);
  const externalIPs = ofFamily(spec.externalIPs);
  // ipMode Proxy: the load balancer delivers to the node itself, so no rule for the VIP.
  const lbIPs = ofFamily(
    (svc.status?.loadBalancer?.ingress ?? [])
      .filter((i: Obj) => i.ip && i.ipMode !== "Proxy").map((i: Obj) => i.ip),
  );
  const sourceRanges = (spec.loadBalancerSourceRanges ?? []).filter((c: string) =>
    isV6(c.trim().split("/")[0]) === v6
  );
  // apiservice.ExternallyAccessible gates the policy; the port decides if it has outside frontends.
  const svcExternal = spec.type === "LoadBalancer" || spec.type === "NodePort" ||
    ((spec.type ?? "ClusterIP") === "ClusterIP" && (spec.externalIPs?.length ?? 0) > 0);
  const sticky = spec.sessionAffinity === "ClientIP"
    ? spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? 10800
    : undefined;
  return (spec.ports ?? []).map((port: Obj): Port => {
    const externallyAccessible = (port.nodePort ?? 0) !== 0 || externalIPs.length > 0 ||
      lbIPs.length > 0;
    return {
      svc,
      port,
      proto: (port.protocol ?? "TCP").toLowerCase(),
      clusterIP,
      externalIPs,
      lbIPs,
      sourceRanges,
      internalLocal: spec.internalTrafficPolicy === "Local",
      externalLocal: svcExternal && spec.externalTrafficPolicy === "Local",
      externallyAccessible,
      sticky,
    };
  });
}

// ---------------------------------------------------------------------------
// Endpoint choice (upstream's CategorizeEndpoints and topologyModeFromHints).

interface Categorized {
  cluster: Ep[];
  local: Ep[];
  /** Some endpoint anywhere can serve: decides REJECT (none) vs DROP. */
  any: boolean;
  /** Topology or terminating fallback applied (coverage only). */
  tags: string[];
}

function categorize(p: Port, eps: Ep[], cfg: ModelConfig, zone: string): Categorized {
  const usesCluster = !p.internalLocal || p.externallyAccessible;
  const usesLocal = p.internalLocal || (p.externalLocal && p.externallyAccessible);
  let cluster: Ep[] = [];
  let local: Ep[] = [];
  let any = false;
  const tags: string[] = [];
  if (usesCluster) {
    const ready = eps.filter((e) => e.ready);
    let usable = ready;
    // Node hints win when every ready endpoint has one and one names this node.
    const nodeHinted = ready.length > 0 && ready.every((e) => e.nodeHints.length > 0);
    const zoneHinted = ready.length > 0 && ready.every((e) => e.zoneHints.length > 0);
    if (nodeHinted && ready.some((e) => e.nodeHints.includes(cfg.nodeName))) {
      usable = ready.filter((e) => e.nodeHints.includes(cfg.nodeName));
      tags.push("node hints");
    } else if (zoneHinted && ready.some((e) => e.zoneHints.includes(zone))) {
      usable = ready.filter((e) => e.zoneHints.includes(zone));
      tags.push("zone hints");
    }
    cluster = usable.length > 0 ? usable : eps.filter((e) => e.serving && e.terminating);
    if (usable.length === 0 && cluster.length > 0) tags.push("terminating fallback");
    any = cluster.length > 0;
  }
  if (usesLocal) {
    if (eps.some((e) => e.ready || (e.serving && e.terminating))) any = true;
    const mine = eps.filter((e) => e.local);
    local = mine.filter((e) => e.ready);
    if (local.length === 0) local = mine.filter((e) => e.serving && e.terminating);
  }
  return { cluster, local, any, tags };
}

// ---------------------------------------------------------------------------
// The packet.

/** The node's primary address of a family: first InternalIP, else first ExternalIP. */
function nodeIPOf(node: Obj, v6: boolean): string | undefined {
  const addrs: Obj[] = node.status?.addresses ?? [];
  for (const type of ["InternalIP", "ExternalIP"]) {
    const a = addrs.find((x) => x.type === type && isV6(x.address) === v6);
    if (a) return a.address;
  }
  return undefined;
}

/** A frontend the packet is addressed to: a Service port and how it was reached. */
interface Hit {
  p: Port;
  kind: "clusterIP" | "externalIP" | "lb" | "nodePort";
}

/** Every frontend `pkt` is addressed to. */
function frontendHits(ports: Port[], pkt: ModelPacket, isNode: (ip: string) => boolean): Hit[] {
  const hits: Hit[] = [];
  for (const p of ports) {
    if (p.proto !== pkt.proto) continue;
    const onPort = pkt.dport === p.port.port;
    if (onPort && sameAddr(pkt.dst, p.clusterIP)) hits.push({ p, kind: "clusterIP" });
    if (onPort && p.externalIPs.some((a) => sameAddr(a, pkt.dst))) {
      hits.push({ p, kind: "externalIP" });
    }
    if (onPort && p.lbIPs.some((a) => sameAddr(a, pkt.dst))) hits.push({ p, kind: "lb" });
    if (p.port.nodePort && pkt.dport === p.port.nodePort && isNode(pkt.dst)) {
      hits.push({ p, kind: "nodePort" });
    }
  }
  // A VIP that is also an externalIP of the same port is one frontend (the same map key), and
  // its loadBalancerSourceRanges apply to it whichever way the address was listed.
  if (hits.length === 2 && hits[0].p === hits[1].p && hits.some((h) => h.kind === "lb")) {
    hits.splice(hits.findIndex((h) => h.kind !== "lb"), 1);
  }
  return hits;
}

/** What happens to a packet addressed to no frontend. */
function notAFrontend(world: ModelWorld, ports: Port[], pkt: ModelPacket): Expected {
  if (ports.some((p) => sameAddr(p.clusterIP, pkt.dst))) {
    return { verdict: "REJECT", why: "a ClusterIP, but no such port and protocol" };
  }
  if (world.serviceCIDRs.some((c) => inCIDR(pkt.dst, c))) {
    return { verdict: "DROP", why: "an unallocated address in a ServiceCIDR" };
  }
  return { verdict: "ACCEPT", why: "not a Service frontend", targets: [] };
}

/** What kube-proxy does with `pkt`. */
export function expect(world: ModelWorld, cfg: ModelConfig, pkt: ModelPacket): Expected {
  const v6 = isV6(pkt.dst);
  const nodeIP = nodeIPOf(world.node, v6);
  const zone = world.node.metadata?.labels?.[ZONE_LABEL] ?? "";
  const isPod = (ip: string) => cfg.clusterCIDRs.some((c) => inCIDR(ip, c));
  const isNode = (ip: string) => nodeIP !== undefined && sameAddr(ip, nodeIP);

  const ports = [...world.services].flatMap((s) => portsOf(s, v6));
  const hits = frontendHits(ports, pkt, isNode);
  if (hits.length > 1) throw new Error(`model: packet matches ${hits.length} frontends`);
  if (hits.length === 0) return notAFrontend(world, ports, pkt);

  const { p, kind } = hits[0];
  const eps = endpointsOf(world, cfg, p.svc, p.port, v6);
  const cat = categorize(p, eps, cfg, zone);
  const accept = (list: Ep[], masq: boolean, why: string): Expected => {
    // A pod reaching itself through the Service is always masqueraded (hairpin).
    const hairpin = list.some((e) => sameAddr(e.ip, pkt.src));
    const tags = [...cat.tags, ...(hairpin ? ["hairpin"] : []), ...(p.sticky ? ["affinity"] : [])];
    return {
      verdict: "ACCEPT",
      why,
      targets: list.map((e) => ({
        ip: e.ip,
        port: e.port,
        masquerade: masq || sameAddr(e.ip, pkt.src),
      })),
      ...(p.sticky === undefined ? {} : { stickySeconds: p.sticky }),
      tags,
    };
  };
  const none = (why: string): Expected =>
    cat.any ? { verdict: "DROP", why: `${why}: none usable here` } : {
      verdict: "REJECT",
      why: `${why}: the Service has no endpoints`,
    };

  if (kind === "clusterIP") {
    const list = p.internalLocal ? cat.local : cat.cluster;
    if (list.length === 0) return none("ClusterIP");
    // Traffic from outside the pod network is masqueraded so replies come back here.
    return accept(list, !isPod(pkt.src), "ClusterIP");
  }

  // External destinations: loadBalancerSourceRanges are checked first (before DNAT), on LB IPs only.
  if (kind === "lb" && p.sourceRanges.length > 0) {
    const inRange = p.sourceRanges.some((c) => inCIDR(pkt.src, c));
    // A range holding the node IP also admits the LB IPs themselves as sources.
    const nodeInRange = nodeIP !== undefined && p.sourceRanges.some((c) => inCIDR(nodeIP, c));
    const fromVIP = nodeInRange && p.lbIPs.some((a) => sameAddr(a, pkt.src));
    if (!inRange && !fromVIP) {
      return { verdict: "DROP", why: "source not in loadBalancerSourceRanges" };
    }
    cat.tags.push(inRange ? "source range admits" : "source range admits the VIP (node in range)");
  }
  if (!cat.any) return { verdict: "REJECT", why: `${kind}: the Service has no endpoints` };
  if (!p.externalLocal) return accept(cat.cluster, true, `${kind}, policy Cluster`);
  // Policy Local: pods and the node itself are short-circuited to every endpoint.
  if (isPod(pkt.src)) return accept(cat.cluster, false, `${kind}, policy Local, from a pod`);
  if (isNode(pkt.src)) return accept(cat.cluster, true, `${kind}, policy Local, from the node`);
  if (cat.local.length === 0) return none(`${kind}, policy Local`);
  return accept(cat.local, false, `${kind}, policy Local`);
}
