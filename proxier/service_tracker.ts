/**
 * Services -> per-family {@link ServicePortInfo}s, with changes accumulated
 * between syncs (kube-proxy's ServiceChangeTracker). Each Service is parsed
 * and validated once, when its event arrives; `checkout()` hands the net
 * changes to the cluster state.
 *
 * @module
 */

import { canonicalCIDR } from "../net/cidr.ts";
import { formatIP, parseIP } from "../net/ip.ts";
import type { Protocol, ServicePortInfo } from "./model.ts";
import { familyOfText, type IpFamily } from "../net/family.ts";
import { LABEL_SERVICE_PROXY_NAME, sameVersion, type V1Service } from "./k8s_types.ts";
import { consoleLog, type LogFn } from "../net/log.ts";
import { sameStrings } from "../net/arrays.ts";
import { intern } from "./intern.ts";

/** Default ClientIP affinity timeout (3 hours), as the API server defaults it. */
const DEFAULT_STICKY_MAX_AGE_SECONDS = 10800;

const PROTOCOLS: ReadonlySet<string> = new Set(["TCP", "UDP", "SCTP"]);

/** `namespace/name`. */
export function objectKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** `namespace/name` of an object, or null when either is missing. */
function metaKey(
  obj: { metadata?: { namespace?: string; name?: string } } | null,
): string | null {
  const ns = obj?.metadata?.namespace;
  const name = obj?.metadata?.name;
  return typeof ns === "string" && ns !== "" && typeof name === "string" && name !== ""
    ? objectKey(ns, name)
    : null;
}

function isPort(v: unknown, allowZero: boolean): v is number {
  return typeof v === "number" && Number.isInteger(v) && v <= 65535 &&
    (v >= 1 || (allowZero && v === 0));
}

/** Why a Service is not proxied at all (not an error), or undefined. */
export function ignoreReason(svc: V1Service): string | undefined {
  if (svc.metadata?.labels?.[LABEL_SERVICE_PROXY_NAME] !== undefined) return "service-proxy-name";
  const spec = svc.spec;
  if (spec?.type === "ExternalName") return "ExternalName";
  const first = spec?.clusterIPs?.[0] ?? spec?.clusterIP;
  if (first === "None") return "headless";
  if (first === undefined || first === null || first === "") return "no clusterIP";
  return undefined;
}

/**
 * Splits addresses by family in canonical form, dropping (and logging) the
 * ones that do not parse.
 */
function splitIPs(
  values: readonly (string | null | undefined)[],
  field: string,
  key: string,
  log: LogFn,
): Record<IpFamily, string[]> {
  const out: Record<IpFamily, string[]> = { 4: [], 6: [] };
  for (const v of values) {
    const ip = typeof v === "string" ? parseIP(v) : null;
    if (!ip) {
      log(
        "warn",
        `service ${key}: ignoring ${field} value ${JSON.stringify(v)}: not an IP address`,
        {
          service: key,
          field,
          value: v,
          expected: "an IPv4 or IPv6 address",
        },
      );
      continue;
    }
    const text = formatIP(ip);
    if (!out[ip.family].includes(text)) out[ip.family].push(text);
  }
  return out;
}

/** How Services are read, from the agent's feature gates. */
export interface ServiceParseOptions {
  /**
   * Program `spec.externalIPs` (feature gate AllowServiceExternalIPs, default true). When false
   * they are dropped as if unset (KEP-5707): no rules, and a ClusterIP Service with only
   * externalIPs is not externally accessible.
   */
  externalIPs?: boolean;
}

/**
 * Parses one Service into its ServicePortInfos, both families. Returns []
 * for a Service that is not proxied (headless, ExternalName,
 * service-proxy-name label) or is invalid as a whole; invalid ports or
 * values are skipped with one log line each naming the Service, the field,
 * the value and what was expected.
 */
export function parseService(
  svc: V1Service,
  log: LogFn = consoleLog,
  opts: ServiceParseOptions = {},
): ServicePortInfo[] {
  const key = metaKey(svc);
  if (!key) {
    log("error", "ignoring Service without metadata.namespace/metadata.name", {
      name: svc?.metadata?.name,
      namespace: svc?.metadata?.namespace,
    });
    return [];
  }
  if (ignoreReason(svc) !== undefined) return [];
  const spec = svc.spec!;
  const bad = badValue(key, log);
  // ClusterIPs decide the families; a bad one invalidates the whole Service.
  const clusterIP = clusterIPsOf(spec, bad);
  if (!clusterIP) return [];
  const type = spec.type ?? "ClusterIP";
  const rawExternalIPs = opts.externalIPs === false ? [] : spec.externalIPs ?? [];
  const externalIPs = splitIPs(rawExternalIPs, "spec.externalIPs", key, log);
  const lbIngress = (svc.status?.loadBalancer?.ingress ?? [])
    .filter((ing) => ing && typeof ing.ip === "string" && ing.ip !== "" && ing.ipMode !== "Proxy")
    .map((ing) => ing.ip);
  const lbIPs = splitIPs(lbIngress, "status.loadBalancer.ingress[].ip", key, log);
  const ranges = sourceRangesOf(spec, key, log);
  const sticky = stickyOf(spec, bad);
  if (sticky === undefined) return [];
  const externallyAccessible = type === "LoadBalancer" || type === "NodePort" ||
    (type === "ClusterIP" && rawExternalIPs.length > 0);
  const externalPolicyLocal = externallyAccessible && spec.externalTrafficPolicy === "Local";
  const healthCheckNodePort = type === "LoadBalancer" && externalPolicyLocal
    ? healthCheckNodePortOf(spec, key, log, bad)
    : 0;
  if (healthCheckNodePort === undefined) return [];
  const out: ServicePortInfo[] = [];
  for (const { port, portName, protocol, nodePort } of validPorts(spec, bad)) {
    for (const family of [4, 6] as const) {
      const cip = clusterIP[family];
      if (cip === undefined) continue;
      out.push({
        id: `${key}:${portName}`,
        // Listed Services arrive unslimmed: one shared copy of the names that repeat.
        namespace: intern(svc.metadata!.namespace!),
        name: svc.metadata!.name!,
        portName: intern(portName),
        protocol: intern(protocol),
        family,
        clusterIP: cip,
        port,
        nodePort,
        externalIPs: orNone(externalIPs[family]),
        loadBalancerIPs: orNone(lbIPs[family]),
        loadBalancerSourceRanges: orNone(ranges[family]),
        stickyMaxAgeSeconds: sticky,
        externalPolicyLocal,
        internalPolicyLocal: spec.internalTrafficPolicy === "Local",
        healthCheckNodePort,
      });
    }
  }
  // Kept for the Service's life: in a backing store of its length (push leaves 16 slots).
  return out.slice();
}

/**
 * The one empty list every ServicePortInfo without externalIPs, LoadBalancer IPs or source
 * ranges shares (three empty arrays per port were 3 MB at 30k Services). Frozen: nothing may
 * add to a parsed Service.
 */
const NONE = Object.freeze([]) as unknown as string[];

function orNone(list: string[]): string[] {
  return list.length === 0 ? NONE : list;
}

/** Logs one invalid value of a Service: the field, the value and what was expected. */
type Bad = (field: string, value: unknown, expected: string, what?: string) => void;

/** The {@link Bad} logger of Service `key`. */
function badValue(key: string, log: LogFn): Bad {
  return (field, value, expected, what = "Service") => {
    log(
      "error",
      `service ${key}: ignoring ${what}: ${field} is ${
        JSON.stringify(value)
      }, expected ${expected}`,
      { service: key, field, value, expected },
    );
  };
}

type Spec = NonNullable<V1Service["spec"]>;

/** The ClusterIP of each family, or undefined (logged) when one is bad or a family repeats. */
function clusterIPsOf(spec: Spec, bad: Bad): Partial<Record<IpFamily, string>> | undefined {
  const listed = spec.clusterIPs && spec.clusterIPs.length > 0;
  const rawClusterIPs = listed ? spec.clusterIPs! : [spec.clusterIP];
  const clusterIP: Partial<Record<IpFamily, string>> = {};
  for (const [i, raw] of rawClusterIPs.entries()) {
    const field = listed ? `spec.clusterIPs[${i}]` : "spec.clusterIP";
    const ip = typeof raw === "string" ? parseIP(raw) : null;
    if (!ip) {
      bad(field, raw, "an IPv4 or IPv6 address");
      return undefined;
    }
    if (clusterIP[ip.family] !== undefined) {
      bad(field, raw, `at most one IPv${ip.family} address in spec.clusterIPs`);
      return undefined;
    }
    clusterIP[ip.family] = formatIP(ip);
  }
  return clusterIP;
}

/** loadBalancerSourceRanges per family, canonical and unique; a bad one is skipped (logged). */
function sourceRangesOf(spec: Spec, key: string, log: LogFn): Record<IpFamily, string[]> {
  const ranges: Record<IpFamily, string[]> = { 4: [], 6: [] };
  for (const raw of spec.loadBalancerSourceRanges ?? []) {
    // Validation lets whitespace padding through, so trim like upstream does.
    const c = typeof raw === "string" ? canonicalCIDR(raw.trim()) : null;
    if (!c) {
      log(
        "warn",
        `service ${key}: ignoring spec.loadBalancerSourceRanges value ${
          JSON.stringify(raw)
        }: not a CIDR`,
        {
          service: key,
          field: "spec.loadBalancerSourceRanges",
          value: raw,
          expected: "a CIDR such as 198.18.0.0/16 or 2001:db8::/32",
        },
      );
      continue;
    }
    const fam = familyOfText(c);
    if (!ranges[fam].includes(c)) ranges[fam].push(c);
  }
  return ranges;
}

/** ClientIP affinity's timeout in seconds (0 without affinity), or undefined (logged) when bad. */
function stickyOf(spec: Spec, bad: Bad): number | undefined {
  if (spec.sessionAffinity !== "ClientIP") return 0;
  const t = spec.sessionAffinityConfig?.clientIP?.timeoutSeconds;
  if (t === undefined || t === null) return DEFAULT_STICKY_MAX_AGE_SECONDS;
  if (Number.isInteger(t) && t >= 1 && t <= 86400) return t;
  bad("spec.sessionAffinityConfig.clientIP.timeoutSeconds", t, "an integer from 1 to 86400");
  return undefined;
}

/**
 * A LoadBalancer with externalTrafficPolicy Local's health check port: 0 when it is missing
 * (a warning), undefined (logged) when it is not a port.
 */
function healthCheckNodePortOf(spec: Spec, key: string, log: LogFn, bad: Bad): number | undefined {
  const h = spec.healthCheckNodePort;
  if (h === undefined || h === null || h === 0) {
    log(
      "warn",
      `service ${key}: spec.healthCheckNodePort is missing; no health check will be served`,
      {
        service: key,
        field: "spec.healthCheckNodePort",
        value: h,
        expected: "a port from 1 to 65535 for a LoadBalancer with externalTrafficPolicy Local",
      },
    );
    return 0;
  }
  if (!isPort(h, false)) {
    bad("spec.healthCheckNodePort", h, "a port from 1 to 65535");
    return undefined;
  }
  return h;
}

/** The Service's valid ports; each bad one is skipped with a log line. */
function validPorts(
  spec: Spec,
  bad: Bad,
): { port: number; portName: string; protocol: Protocol; nodePort: number }[] {
  const out: { port: number; portName: string; protocol: Protocol; nodePort: number }[] = [];
  const seen = new Set<string>();
  for (const [i, p] of (spec.ports ?? []).entries()) {
    const portName = p?.name ?? "";
    const what = `port ${JSON.stringify(portName)}`;
    const protocol = p?.protocol ?? "TCP";
    if (typeof portName !== "string") {
      bad(`spec.ports[${i}].name`, portName, "a string", "port");
      continue;
    }
    if (!PROTOCOLS.has(protocol)) {
      bad(`spec.ports[${i}].protocol`, protocol, "TCP, UDP or SCTP", what);
      continue;
    }
    if (!isPort(p.port, false)) {
      bad(`spec.ports[${i}].port`, p.port, "an integer from 1 to 65535", what);
      continue;
    }
    const nodePort = p.nodePort ?? 0;
    if (!isPort(nodePort, true)) {
      bad(`spec.ports[${i}].nodePort`, nodePort, "0 or an integer from 1 to 65535", what);
      continue;
    }
    if (seen.has(portName)) {
      bad(`spec.ports[${i}].name`, portName, "a name unique within the Service", what);
      continue;
    }
    seen.add(portName);
    out.push({ port: p.port, portName, protocol: protocol as Protocol, nodePort });
  }
  return out;
}

/** Whether two ServicePortInfos are identical in every field. */
export function sameServicePort(
  a: ServicePortInfo | undefined,
  b: ServicePortInfo | undefined,
): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  return a.id === b.id && a.family === b.family && a.protocol === b.protocol &&
    a.clusterIP === b.clusterIP && a.port === b.port && a.nodePort === b.nodePort &&
    a.stickyMaxAgeSeconds === b.stickyMaxAgeSeconds &&
    a.externalPolicyLocal === b.externalPolicyLocal &&
    a.internalPolicyLocal === b.internalPolicyLocal &&
    a.healthCheckNodePort === b.healthCheckNodePort &&
    a.namespace === b.namespace && a.name === b.name && a.portName === b.portName &&
    sameStrings(a.externalIPs, b.externalIPs) &&
    sameStrings(a.loadBalancerIPs, b.loadBalancerIPs) &&
    sameStrings(a.loadBalancerSourceRanges, b.loadBalancerSourceRanges);
}

function samePorts(a: readonly ServicePortInfo[], b: readonly ServicePortInfo[]): boolean {
  return a.length === b.length && a.every((p, i) => sameServicePort(p, b[i]));
}

/** One Service's net change since the last checkout. */
export interface ServiceChange {
  /** Its ports as last checked out. */
  previous: readonly ServicePortInfo[];
  /** Its ports now ([] when deleted). */
  current: readonly ServicePortInfo[];
}

/** Accumulates Service changes between syncs. */
export class ServiceTracker {
  #applied = new Map<string, readonly ServicePortInfo[]>();
  #pending = new Map<string, readonly ServicePortInfo[]>();
  #log: LogFn;
  #opts: ServiceParseOptions;

  /**
   * A tracker with no Services yet.
   * @param log where validation problems are reported.
   * @param opts how Services are read (feature gates).
   */
  constructor(log: LogFn = consoleLog, opts: ServiceParseOptions = {}) {
    this.#log = log;
    this.#opts = opts;
  }

  /**
   * Records an add (prev null), update, or delete (cur null). Returns
   * whether it changed what the next checkout will report.
   */
  update(prev: V1Service | null, cur: V1Service | null): boolean {
    // A re-delivered version cannot change anything (and must not log again).
    if (sameVersion(prev, cur)) return false;
    const key = metaKey(cur) ?? metaKey(prev);
    if (!key) {
      if (cur ?? prev) parseService((cur ?? prev)!, this.#log, this.#opts); // logs it
      return false;
    }
    const ports = cur ? parseService(cur, this.#log, this.#opts) : [];
    const before = this.#pending.get(key);
    const applied = this.#applied.get(key) ?? [];
    if (samePorts(ports, applied)) this.#pending.delete(key);
    else this.#pending.set(key, ports);
    const after = this.#pending.get(key);
    return before === undefined
      ? after !== undefined
      : after === undefined || !samePorts(before, after);
  }

  /** Number of Services with pending changes. */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /** The applied ServicePortInfos of a Service (both families), [] when none. */
  ports(key: string): readonly ServicePortInfo[] {
    return this.#applied.get(key) ?? [];
  }

  /** Returns the pending changes by Service key and marks them applied. */
  checkout(): Map<string, ServiceChange> {
    const out = new Map<string, ServiceChange>();
    for (const [key, current] of this.#pending) {
      out.set(key, { previous: this.#applied.get(key) ?? [], current });
      if (current.length === 0) this.#applied.delete(key);
      else this.#applied.set(key, current);
    }
    this.#pending.clear();
    return out;
  }
}
