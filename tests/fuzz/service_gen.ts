/**
 * Random valid Services and changes to them, for the fuzzed-cluster-state test. Dependencies
 * between fields follow API validation and defaulting (see {@link normalize}): NodePorts only on
 * NodePort and LoadBalancer Services, externalTrafficPolicy only where the Service is externally
 * accessible, healthCheckNodePort only for LoadBalancer + Local, unique port names and
 * (port, protocol) pairs, names of at most 63 characters.
 *
 * @module
 */
import { familyLabel, type IpFamilyLabel, toIpFamily } from "../../net/family.ts";
import type { Obj } from "./reference_model.ts";
import type { World } from "./cluster_gen.ts";

/** Randomness, allocation and storage the generators share (implemented by ClusterFuzzer). */
export interface Gen {
  readonly world: World;
  r(): number;
  pick<T>(xs: readonly T[]): T;
  chance(p: number): boolean;
  int(lo: number, hi: number): number;
  serial(): number;
  clusterIP(fam: 4 | 6): string;
  externalIP(fam: 4 | 6): string;
  lbIP(fam: 4 | 6): string;
  nodePort(): number;
  freeNodePort(p: number | undefined): void;
  podIP(fam: 4 | 6, where: "local" | "remote" | "nameless"): string;
  put(kind: "Service" | "EndpointSlice", obj: Obj): void;
  remove(kind: "Service" | "EndpointSlice", key: string): void;
  slicesOf(svc: Obj): Obj[];
}

/** Label that hands a Service to another proxy. */
export const PROXY_NAME = "service.kubernetes.io/service-proxy-name";

const NAMESPACES = ["default", "kube-system", `ns-${"l".repeat(58)}-z`]; // the last is 63 chars
/** IANA service names: at most 15 characters. */
const PORT_NAMES = [
  "http",
  "https",
  "dns",
  "dns-tcp",
  "metrics",
  "grpc",
  "a",
  "x23456789abcdef",
  "p-1",
];
const PORT_NUMBERS = [1, 65535, 53, 80, 443, 8080];

/** The IP families of a Service, in its order (ipFamilies). */
export function familiesOf(svc: Obj): (4 | 6)[] {
  return (svc.spec.ipFamilies ?? []).map((f: string) => toIpFamily(f as IpFamilyLabel));
}

function serviceName(g: Gen): string {
  const n = g.serial();
  if (g.chance(0.25)) {
    const base = `svc-${n}-`;
    return base + "x".repeat(62 - base.length) + "9"; // 63 characters
  }
  return `${g.pick(["a", "web", "dns", "api"])}-${n}`;
}

function protocol(g: Gen): string {
  const x = g.r();
  return x < 0.6 ? "TCP" : x < 0.85 ? "UDP" : "SCTP";
}

/** A new port that keeps names and (port, protocol) pairs unique among `ports`. */
function newPort(g: Gen, ports: Obj[], nameless: boolean): Obj {
  const names = new Set(ports.map((p) => p.name ?? ""));
  let name = "";
  if (!nameless) {
    do name = g.pick(PORT_NAMES); while (names.has(name));
  }
  let proto: string, port: number;
  do {
    proto = protocol(g);
    port = g.chance(0.6) ? g.pick(PORT_NUMBERS) : g.int(1, 65535);
  } while (ports.some((p) => p.port === port && p.protocol === proto));
  const targetPort = g.chance(0.3)
    ? g.pick(["web", "tp-a", "metrics"]) // named: each pod's number, in its slice
    : g.pick([1, 65535, 8080, port, g.int(1, 65535)]);
  const p: Obj = { protocol: proto, port, targetPort };
  if (name !== "") p.name = name; // the API omits an empty name
  return p;
}

function newPorts(g: Gen, count: number): Obj[] {
  const ports: Obj[] = [];
  for (let i = 0; i < count; i++) ports.push(newPort(g, ports, count === 1 && g.chance(0.5)));
  return ports;
}

/** ipFamilyPolicy and ipFamilies, with the cluster dual-stack. */
function families(g: Gen): { policy: string; fams: (4 | 6)[] } {
  const x = g.r();
  if (x < 0.35) return { policy: "SingleStack", fams: [4] };
  if (x < 0.55) return { policy: "SingleStack", fams: [6] };
  const policy = g.pick(["PreferDualStack", "RequireDualStack"]);
  return { policy, fams: x < 0.8 ? [4, 6] : [6, 4] };
}

const famName = familyLabel;

/** A new Service of a random type, with its noise fields. */
export function newService(g: Gen): Obj {
  const name = serviceName(g);
  const namespace = g.pick(NAMESPACES);
  const x = g.r();
  const kind = x < 0.3
    ? "ClusterIP"
    : x < 0.5
    ? "NodePort"
    : x < 0.78
    ? "LoadBalancer"
    : x < 0.84
    ? "ExternalName"
    : x < 0.94
    ? "Headless"
    : "Foreign";
  const meta: Obj = {
    name,
    namespace,
    uid: `00000000-0000-4000-8000-${String(g.serial()).padStart(12, "0")}`,
    creationTimestamp: "2026-01-01T00:00:00Z",
    labels: { app: name },
    annotations: { "kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Service"}' },
    managedFields: [{ manager: "kubectl", operation: "Apply", fieldsV1: { "f:spec": {} } }],
  };
  if (kind === "Foreign") meta.labels[PROXY_NAME] = "other-proxy";
  const svc: Obj = { apiVersion: "v1", kind: "Service", metadata: meta, spec: {}, status: {} };
  if (kind === "ExternalName") {
    svc.spec = { type: "ExternalName", externalName: "db.example.com", sessionAffinity: "None" };
    if (g.chance(0.5)) svc.spec.ports = newPorts(g, 1);
    return svc;
  }
  const { policy, fams } = families(g);
  const ports = newPorts(g, g.pick([1, 1, 2, 3, 4]));
  const spec: Obj = {
    type: kind === "Headless" || kind === "Foreign" ? "ClusterIP" : kind,
    selector: { app: name },
    ports,
    ipFamilies: fams.map(famName),
    ipFamilyPolicy: policy,
    sessionAffinity: "None",
    internalTrafficPolicy: g.chance(0.25) ? "Local" : "Cluster",
  };
  if (kind === "Headless") {
    spec.clusterIP = "None";
    spec.clusterIPs = ["None"];
    svc.spec = spec;
    return svc;
  }
  spec.clusterIPs = fams.map((f) => g.clusterIP(f));
  spec.clusterIP = spec.clusterIPs[0];
  svc.spec = spec;
  if (g.chance(0.25)) setAffinity(g, svc);
  if (kind !== "Foreign" && g.chance(0.25)) spec.externalIPs = newExternalIPs(g, fams);
  if (g.chance(0.2)) {
    spec.trafficDistribution = g.pick(["PreferClose", "PreferSameZone", "PreferSameNode"]);
  }
  if (kind === "LoadBalancer") {
    if (g.chance(0.15)) spec.allocateLoadBalancerNodePorts = false;
    if (g.chance(0.6)) spec.loadBalancerSourceRanges = sourceRanges(g);
    setIngress(g, svc);
    // The VIP listed as an externalIP as well (as MetalLB users often do).
    const vip = svc.status.loadBalancer.ingress?.find((i: Obj) => i.ip)?.ip;
    if (vip !== undefined && g.chance(0.2)) spec.externalIPs = [...(spec.externalIPs ?? []), vip];
  }
  if (g.chance(0.4)) spec.externalTrafficPolicy = "Local";
  normalize(g, svc);
  return svc;
}

function setAffinity(g: Gen, svc: Obj): void {
  svc.spec.sessionAffinity = "ClientIP";
  const t = g.pick([undefined, 1, 86400, 10800, g.int(2, 3600)]);
  if (t === undefined) delete svc.spec.sessionAffinityConfig;
  else svc.spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: t } };
}

function newExternalIPs(g: Gen, fams: (4 | 6)[]): string[] {
  // Sometimes of a family the Service does not have: ignored there.
  return Array.from(
    { length: g.int(1, 2) },
    () => g.externalIP(g.chance(0.85) ? g.pick(fams) : g.pick([4, 6])),
  );
}

function sourceRanges(g: Gen): string[] {
  return g.pick([
    ["198.18.150.0/24"],
    ["198.18.150.0/24", "198.18.0.0/24"], // holds the node IP: the LB IPs may be sources too
    [" 198.18.150.0/23 "], // padded, as validation lets through
    ["2001:db8:150::/64"],
    ["198.18.150.0/24", "2001:db8:150::/64", "2001:db8::/64"],
    ["198.18.0.0/24"],
    ["198.18.0.0/16", "2001:db8::/32"], // everyone (and the node) in both families
    ["198.18.152.0/24", "2001:db8:152::/64"],
  ]);
}

/** LoadBalancer status: VIPs of the Service's families, ipMode Proxy ones, hostnames, or none. */
function setIngress(g: Gen, svc: Obj): void {
  const fams = familiesOf(svc);
  const ingress: Obj[] = [];
  for (let i = g.int(0, 3); i > 0; i--) {
    const x = g.r();
    if (x < 0.1) ingress.push({ hostname: `lb-${g.serial()}.example.com` });
    else {
      const ing: Obj = { ip: g.lbIP(g.pick(fams)) };
      if (x < 0.25) ing.ipMode = "Proxy";
      else if (x < 0.5) ing.ipMode = "VIP";
      ingress.push(ing);
    }
  }
  svc.status = { loadBalancer: ingress.length > 0 ? { ingress } : {} };
}

/** Applies API defaulting and validation's field dependencies after a change. */
export function normalize(g: Gen, svc: Obj): void {
  const s = svc.spec;
  const lb = s.type === "LoadBalancer";
  const external = lb || s.type === "NodePort" || (s.externalIPs?.length ?? 0) > 0;
  if (external) s.externalTrafficPolicy ??= "Cluster";
  else delete s.externalTrafficPolicy;
  const wantNodePorts = s.type === "NodePort" || (lb && s.allocateLoadBalancerNodePorts !== false);
  for (const p of s.ports) {
    if (wantNodePorts && p.nodePort === undefined) p.nodePort = g.nodePort();
    if (!wantNodePorts && p.nodePort !== undefined) {
      g.freeNodePort(p.nodePort);
      delete p.nodePort;
    }
  }
  const wantHealth = lb && s.externalTrafficPolicy === "Local";
  if (wantHealth && s.healthCheckNodePort === undefined) s.healthCheckNodePort = g.nodePort();
  if (!wantHealth && s.healthCheckNodePort !== undefined) {
    g.freeNodePort(s.healthCheckNodePort);
    delete s.healthCheckNodePort;
  }
  if (!lb) {
    delete s.loadBalancerSourceRanges;
    delete s.allocateLoadBalancerNodePorts;
    svc.status = {};
  }
  if (s.sessionAffinity !== "ClientIP") delete s.sessionAffinityConfig;
  if ((s.externalIPs?.length ?? 0) === 0) delete s.externalIPs;
}

/** One random change to a Service; false when nothing changed (headless, ExternalName). */
export function mutateService(g: Gen, svc: Obj): boolean {
  const s = svc.spec;
  if (svc.metadata.labels[PROXY_NAME] !== undefined) {
    // Handed back to us: the controller relabels the slices too.
    delete svc.metadata.labels[PROXY_NAME];
    for (const sl of g.slicesOf(svc)) {
      delete sl.metadata.labels[PROXY_NAME];
      g.put("EndpointSlice", sl);
    }
    return true;
  }
  if (s.type === "ExternalName" || s.clusterIP === "None") return false;
  const x = g.int(0, 11);
  if (x === 0) s.internalTrafficPolicy = s.internalTrafficPolicy === "Local" ? "Cluster" : "Local";
  else if (x === 1) {
    s.externalTrafficPolicy = s.externalTrafficPolicy === "Local" ? "Cluster" : "Local";
  } else if (x === 2) {
    if (s.sessionAffinity === "ClientIP" && g.chance(0.4)) s.sessionAffinity = "None";
    else setAffinity(g, svc);
  } else if (x === 3) changePorts(g, svc);
  else if (x === 4) s.externalIPs = g.chance(0.3) ? [] : newExternalIPs(g, familiesOf(svc));
  else if (x === 5) s.type = g.pick(["ClusterIP", "NodePort", "LoadBalancer"]);
  else if (x === 6 && s.type === "LoadBalancer") setIngress(g, svc);
  else if (x === 7 && s.type === "LoadBalancer") {
    s.loadBalancerSourceRanges = g.chance(0.3) ? undefined : sourceRanges(g);
  } else if (x === 8) changeFamilies(g, svc);
  else if (x === 9 && s.type === "LoadBalancer") {
    s.allocateLoadBalancerNodePorts = s.allocateLoadBalancerNodePorts === false;
  } else if (x === 10) {
    s.trafficDistribution = g.pick([undefined, "PreferClose", "PreferSameZone", "PreferSameNode"]);
  } else s.internalTrafficPolicy = g.pick(["Cluster", "Local"]);
  if (s.loadBalancerSourceRanges === undefined) delete s.loadBalancerSourceRanges;
  if (s.trafficDistribution === undefined) delete s.trafficDistribution;
  normalize(g, svc);
  return true;
}

function changePorts(g: Gen, svc: Obj): void {
  const ports: Obj[] = svc.spec.ports;
  const x = g.int(0, 4);
  if (x === 0 && ports.length < 4) {
    // A second port needs every port named.
    for (const p of ports) if (p.name === undefined) p.name = PORT_NAMES.find((n) => n !== "a")!;
    ports.push(newPort(g, ports, false));
  } else if (x === 1 && ports.length > 1) {
    const [gone] = ports.splice(g.int(0, ports.length - 1), 1);
    g.freeNodePort(gone.nodePort);
  } else if (x === 2 && ports.length > 1) {
    const p = g.pick(ports);
    const taken = new Set(ports.map((q) => q.name));
    const name = g.pick(PORT_NAMES);
    if (!taken.has(name)) p.name = name;
  } else {
    const p = g.pick(ports);
    const others = ports.filter((q) => q !== p);
    const fresh = newPort(g, others, true);
    if (x === 3) p.port = fresh.port;
    else p.protocol = fresh.protocol;
    if (others.some((q) => q.port === p.port && q.protocol === p.protocol)) {
      p.port = fresh.port;
      p.protocol = fresh.protocol;
    }
    if (g.chance(0.3)) p.targetPort = fresh.targetPort;
  }
}

/** SingleStack -> PreferDualStack (a second ClusterIP), or back (the secondary goes). */
function changeFamilies(g: Gen, svc: Obj): void {
  const s = svc.spec;
  const fams = familiesOf(svc);
  if (fams.length === 1) {
    const other: 4 | 6 = fams[0] === 4 ? 6 : 4;
    s.ipFamilyPolicy = "PreferDualStack";
    s.ipFamilies = [...s.ipFamilies, famName(other)];
    s.clusterIPs = [...s.clusterIPs, g.clusterIP(other)];
  } else {
    s.ipFamilyPolicy = "SingleStack";
    s.ipFamilies = s.ipFamilies.slice(0, 1);
    s.clusterIPs = s.clusterIPs.slice(0, 1);
  }
}
