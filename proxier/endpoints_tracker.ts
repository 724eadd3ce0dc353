/**
 * EndpointSlices -> endpoints per Service port, with changes accumulated
 * between syncs (kube-proxy's EndpointsChangeTracker + EndpointSliceCache).
 * Slices are parsed and validated when their event arrives; a checkout
 * re-merges only the Services whose slices changed, so its cost follows the
 * number of changes, not the cluster size.
 *
 * @module
 */

import { canonicalText, parseIP } from "../net/ip.ts";
import type { EndpointInfo, Protocol } from "./model.ts";
import type { IpFamily } from "../net/family.ts";
import {
  type EndpointSlice,
  LABEL_HEADLESS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
  sameVersion,
} from "./k8s_types.ts";
import { consoleLog, type LogFn } from "../net/log.ts";
import { sameStrings } from "../net/arrays.ts";
import { objectKey } from "./service_tracker.ts";
import { newerWins, NO_TARGET, targetId } from "./endpoint_dedup.ts";
import {
  compareKeys,
  mergeSlices,
  type ParsedSlice,
  sharesAddress,
  type SlicePort,
  sortKeyOf,
  type StoredSlice,
} from "./slice_merge.ts";

export { mergeSlices, type ParsedSlice, type SlicePort } from "./slice_merge.ts";

const PROTOCOLS: ReadonlySet<string> = new Set(["TCP", "UDP", "SCTP"]);

/** Annotation with the time of the change that caused the slice update. */
export const ANNOTATION_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time";

/** Key of one Service port's endpoint list inside a Service: family, port name, protocol. */
export function portKey(family: IpFamily, portName: string, protocol: Protocol): string {
  return `${family}|${portName}|${protocol}`;
}

/** Endpoints of one Service, by {@link portKey}; each list sorted by address then port. */
export type ServiceEndpoints = ReadonlyMap<string, readonly EndpointInfo[]>;

/** Logs one skipped part of a slice: `field` is `value`, `expected` was wanted. */
type BadField = (field: string, value: unknown, expected: string, what: string) => void;

/** What identifies a usable slice of ours. */
interface SliceHead {
  ns: string;
  name: string;
  svcName: string;
  family: IpFamily;
}

/**
 * The namespace, name, Service and family of `slice`, or null when it is unusable (logged) or
 * not ours (headless, another proxy's, FQDN: silently).
 */
function sliceHead(slice: EndpointSlice, log: LogFn): SliceHead | null {
  const ns = slice?.metadata?.namespace;
  const name = slice?.metadata?.name;
  const svcName = slice?.metadata?.labels?.[LABEL_SERVICE_NAME];
  const id = `${ns}/${name}`;
  if (!ns || !name) {
    log("error", "ignoring EndpointSlice without metadata.namespace/metadata.name", {
      namespace: ns,
      name,
    });
    return null;
  }
  const labels = slice.metadata?.labels;
  // Upstream's informer filters these out; slices of headless or foreign Services are not ours.
  if (labels?.[LABEL_HEADLESS] !== undefined || labels?.[LABEL_SERVICE_PROXY_NAME] !== undefined) {
    return null;
  }
  if (slice.addressType === "FQDN") return null;
  if (!svcName) {
    log("warn", `endpointslice ${id}: ignoring it: label ${LABEL_SERVICE_NAME} is missing`, {
      endpointSlice: id,
      field: `metadata.labels[${LABEL_SERVICE_NAME}]`,
      expected: "the name of the Service the slice belongs to",
    });
    return null;
  }
  if (slice.addressType === "IPv4") return { ns, name, svcName, family: 4 };
  if (slice.addressType === "IPv6") return { ns, name, svcName, family: 6 };
  log(
    "error",
    `endpointslice ${id}: ignoring it: addressType is ${
      JSON.stringify(slice.addressType)
    }, expected IPv4, IPv6 or FQDN`,
    {
      endpointSlice: id,
      field: "addressType",
      value: slice.addressType,
      expected: "IPv4, IPv6 or FQDN",
    },
  );
  return null;
}

/** A slice port that passed validation. */
interface ValidPort {
  name: string;
  protocol: Protocol;
  port: number;
}

/** The valid ports of `slice`, in order; each bad one is skipped with a line through `bad`. */
function slicePorts(slice: EndpointSlice, bad: BadField): ValidPort[] {
  const ports: ValidPort[] = [];
  for (const [i, p] of (slice.ports ?? []).entries()) {
    // The API defaults name to "" and protocol to TCP.
    const pname = p?.name ?? "";
    const protocol = p?.protocol ?? "TCP";
    const what = `port ${JSON.stringify(pname)}`;
    if (typeof pname !== "string") {
      bad(`ports[${i}].name`, pname, "a string", "port");
    } else if (!PROTOCOLS.has(protocol)) {
      bad(`ports[${i}].protocol`, protocol, "TCP, UDP or SCTP", what);
    } else if (
      typeof p.port !== "number" || !Number.isInteger(p.port) || p.port < 1 || p.port > 65535
    ) {
      bad(`ports[${i}].port`, p.port ?? null, "an integer from 1 to 65535", what);
    } else if (ports.some((q) => q.name === pname && q.protocol === protocol)) {
      bad(`ports[${i}].name`, pname, "a name unique within the slice", what);
    } else {
      ports.push({ name: pname, protocol: protocol as Protocol, port: p.port });
    }
  }
  return ports;
}

type SliceEndpoint = NonNullable<EndpointSlice["endpoints"]>[number];

/** The EndpointInfo of `ep` (address `ip`, already checked) on `port`. */
function endpointInfo(ep: SliceEndpoint, ip: string, port: number, nodeName: string): EndpointInfo {
  const c = ep.conditions;
  const ready = c?.ready ?? true;
  // As upstream's endpointslicecache.go: an unset `serving` is true, not a copy of `ready`,
  // so a terminating endpoint whose controller never set `serving` is a fallback candidate.
  const serving = c?.serving ?? true;
  const terminating = c?.terminating ?? false;
  const isLocal = ep.nodeName === nodeName && nodeName !== "";
  // One literal per shape: a property added later would cost each of the (hundreds of
  // thousands of) endpoints an out-of-object property array.
  const info: EndpointInfo = ep.nodeName
    ? { ip, port, ready, serving, terminating, isLocal, nodeName: ep.nodeName }
    : { ip, port, ready, serving, terminating, isLocal };
  if (ep.zone) info.zone = ep.zone;
  if (ep.hints) {
    const zones = names(ep.hints.forZones);
    if (zones.length > 0) info.zoneHints = zones;
    const nodes = names(ep.hints.forNodes);
    if (nodes.length > 0) info.nodeHints = nodes;
  }
  return info;
}

/** One endpoint kept, with what sorting and deduplication need. */
interface KeptEndpoint {
  sortKey: number | string;
  ep: EndpointInfo;
  t: number;
}

/**
 * The valid endpoints of `slice` on `port`, one per address, sorted by address. Within one
 * slice a repeated address is decided as across slices (endpoint_dedup.ts), a later position
 * counting as newer.
 */
function sliceEndpoints(
  slice: EndpointSlice,
  family: IpFamily,
  port: number,
  nodeName: string,
  bad: BadField,
): KeptEndpoint[] {
  const index = new Map<string, number>();
  const list: KeptEndpoint[] = [];
  const raw = slice.endpoints ?? [];
  for (let i = 0; i < raw.length; i++) {
    const ep = raw[i];
    // Upstream uses only the first address; the API allows exactly one.
    const addr = ep?.addresses?.[0];
    const parsed = typeof addr === "string" ? parseIP(addr) : null;
    if (!parsed || parsed.family !== family) {
      bad(`endpoints[${i}].addresses[0]`, addr ?? null, `an IPv${family} address`, "endpoint");
      continue;
    }
    const info = endpointInfo(ep, canonicalText(addr!, parsed), port, nodeName);
    const t = targetId(ep.targetRef);
    const at = index.get(info.ip);
    if (at === undefined) {
      index.set(info.ip, list.length);
      list.push({ sortKey: sortKeyOf(parsed), ep: info, t });
    } else if (newerWins(list[at].ep, list[at].t, info, t)) {
      list[at].ep = info;
      list[at].t = t;
    }
  }
  return list.sort((a, b) => compareKeys(a.sortKey, b.sortKey));
}

/**
 * Validates one EndpointSlice. Returns null when the slice is not usable at
 * all (FQDN address type, no service-name label, unknown address type) or
 * not ours (labelled headless or service-proxy-name, silently);
 * bad ports and endpoints are skipped with one log line each.
 */
export function parseEndpointSlice(
  slice: EndpointSlice,
  nodeName: string,
  log: LogFn = consoleLog,
): ParsedSlice | null {
  const head = sliceHead(slice, log);
  if (head === null) return null;
  const { ns, name, svcName, family } = head;
  const id = `${ns}/${name}`;
  const bad: BadField = (field, value, expected, what) => {
    log(
      "error",
      `endpointslice ${id}: ignoring ${what}: ${field} is ${
        JSON.stringify(value)
      }, expected ${expected}`,
      { endpointSlice: id, field, value, expected },
    );
  };
  const ports = slicePorts(slice, bad);
  // Endpoints are built for the first port directly; other ports get copies.
  const firstPort = ports.length > 0 ? ports[0].port : 0;
  const list = sliceEndpoints(slice, family, firstPort, nodeName, bad);
  const targets = list.some((x) => x.t !== NO_TARGET) ? list.map((x) => x.t) : undefined;
  const first = list.map((x) => x.ep);
  const parsedPorts: SlicePort[] = ports.map((p, k) => ({
    key: portKey(family, p.name, p.protocol),
    port: p.port,
    endpoints: k === 0 ? first : first.map((e) => ({ ...e, port: p.port })),
  }));
  const out: ParsedSlice = { service: objectKey(ns, svcName), name, family, ports: parsedPorts };
  if (targets) out.targets = targets;
  return out;
}

function names(list: readonly { name?: string | null }[] | null | undefined): string[] {
  const out: string[] = [];
  if (!list) return out;
  for (const h of list) {
    if (typeof h?.name === "string" && h.name !== "" && !out.includes(h.name)) out.push(h.name);
  }
  return out.sort();
}

/** Whether two endpoints are identical in every field. */
export function sameEndpoint(a: EndpointInfo, b: EndpointInfo): boolean {
  return a.ip === b.ip && a.port === b.port && a.ready === b.ready && a.serving === b.serving &&
    a.terminating === b.terminating && a.isLocal === b.isLocal && a.nodeName === b.nodeName &&
    a.zone === b.zone && sameStrings(a.zoneHints, b.zoneHints) &&
    sameStrings(a.nodeHints, b.nodeHints);
}

/** Whether two endpoint lists are identical (order included). */
export function sameEndpoints(
  a: readonly EndpointInfo[] | undefined,
  b: readonly EndpointInfo[] | undefined,
): boolean {
  if (a === b) return true;
  if (!a || !b) return (a?.length ?? 0) === 0 && (b?.length ?? 0) === 0;
  return a.length === b.length && a.every((e, i) => sameEndpoint(e, b[i]));
}

function sameParsedSlice(a: ParsedSlice, b: ParsedSlice): boolean {
  const ta = a.targets, tb = b.targets;
  const sameTargets = ta === tb ||
    (ta !== undefined && tb !== undefined && ta.length === tb.length &&
      ta.every((t, i) => t === tb[i]));
  return sameTargets && a.service === b.service && a.family === b.family &&
    a.ports.length === b.ports.length &&
    a.ports.every((p, i) =>
      p.key === b.ports[i].key && p.port === b.ports[i].port &&
      sameEndpoints(p.endpoints, b.ports[i].endpoints)
    );
}

/** One Service's endpoints after a change since the last checkout. */
export interface EndpointsChange {
  /** The Service's endpoints now, per service port (empty when it has none left). */
  current: ServiceEndpoints;
}

const EMPTY: ServiceEndpoints = new Map();

/** A Service's slices: almost always one, kept without a Map of its own (30k Maps are 10 MB). */
type ServiceSlices = StoredSlice | Map<string, StoredSlice>;

/**
 * Accumulates EndpointSlice changes between syncs. Merged lists are not kept: the cluster state
 * holds them per service port, and a Service's are re-merged from its slices when needed.
 */
export class EndpointsTracker {
  /** Current slices by Service key. */
  #slices = new Map<string, ServiceSlices>();
  /** Slices changed since the last checkout, by Service key. */
  #pending = new Map<string, Set<string>>();
  #pendingSlices = 0;
  #seq = 0;
  #triggerTimes: number[] = [];
  #startTime: number;
  #nodeName: string;
  #log: LogFn;

  /**
   * An empty tracker; slices arrive through {@link EndpointsTracker.update}.
   *
   * @param nodeName this node's name: endpoints on it are `isLocal`.
   * @param log where validation problems are reported.
   * @param startTime trigger times before this (ms since epoch) are not reported.
   */
  constructor(nodeName: string, log: LogFn = consoleLog, startTime = Date.now()) {
    this.#nodeName = nodeName;
    this.#log = log;
    this.#startTime = startTime;
  }

  /**
   * Records an add (prev null), update, or delete (cur null). Returns
   * whether the slice's content changed.
   */
  update(prev: EndpointSlice | null, cur: EndpointSlice | null): boolean {
    // A re-delivered version cannot change anything (and must not log again).
    if (sameVersion(prev, cur)) return false;
    const prevId = prev ? this.#identify(prev) : null;
    const curParsed = cur ? parseEndpointSlice(cur, this.#nodeName, this.#log) : null;
    let changed = false;
    // Deleted, re-labelled or renamed: drop the old copy.
    if (
      prevId &&
      (!curParsed || curParsed.service !== prevId.service || curParsed.name !== prevId.name)
    ) {
      changed = this.#remove(prevId.service, prevId.name);
    }
    if (curParsed) {
      const stored = this.#store(curParsed);
      if (stored) this.#recordTrigger(cur!);
      changed = stored || changed;
    } else if (cur) {
      // The new version is unusable (FQDN, bad type...): forget any stored copy.
      const id = this.#identify(cur);
      if (id) changed = this.#remove(id.service, id.name) || changed;
    }
    return changed;
  }

  /** Notes the slice's last-change-trigger-time for the network programming latency metric. */
  #recordTrigger(s: EndpointSlice) {
    const raw = s.metadata?.annotations?.[ANNOTATION_TRIGGER_TIME];
    if (!raw) return;
    const t = Date.parse(raw);
    if (Number.isNaN(t)) {
      this.#log(
        "warn",
        `endpointslice ${s.metadata?.namespace}/${s.metadata?.name}: ignoring annotation ${ANNOTATION_TRIGGER_TIME} ${
          JSON.stringify(raw)
        }: not an RFC 3339 time`,
        {
          endpointSlice: `${s.metadata?.namespace}/${s.metadata?.name}`,
          field: `metadata.annotations[${ANNOTATION_TRIGGER_TIME}]`,
          value: raw,
          expected: "an RFC 3339 time",
        },
      );
      return;
    }
    // Changes older than this process would skew the latency metric.
    if (t > this.#startTime) this.#triggerTimes.push(t);
  }

  /** Service key + slice name of a slice, without logging. */
  #identify(s: EndpointSlice): { service: string; name: string } | null {
    const ns = s.metadata?.namespace;
    const name = s.metadata?.name;
    const svc = s.metadata?.labels?.[LABEL_SERVICE_NAME];
    return ns && name && svc ? { service: objectKey(ns, svc), name } : null;
  }

  #store(slice: ParsedSlice): boolean {
    const entry = this.#slices.get(slice.service);
    const single = entry !== undefined && !(entry instanceof Map);
    const old = entry instanceof Map
      ? entry.get(slice.name)
      : single && entry.slice.name === slice.name
      ? entry
      : undefined;
    if (old && sameParsedSlice(old.slice, slice)) {
      // Same content, newer write: the controller wrote every endpoint of it from current Pod
      // state, so it is now the freshest word on an address a sibling slice also lists.
      old.seq = ++this.#seq;
      if (!(entry instanceof Map) || !sharesAddress(slice, entry)) return false;
      this.#markPending(slice.service, slice.name);
      return true;
    }
    const stored = { slice, seq: ++this.#seq };
    if (entry === undefined || old === entry) this.#slices.set(slice.service, stored);
    else if (entry instanceof Map) entry.set(slice.name, stored);
    else {
      this.#slices.set(
        slice.service,
        new Map([[entry.slice.name, entry], [slice.name, stored]]),
      );
    }
    this.#markPending(slice.service, slice.name);
    return true;
  }

  #remove(service: string, name: string): boolean {
    const entry = this.#slices.get(service);
    if (entry === undefined) return false;
    if (entry instanceof Map) {
      if (!entry.delete(name)) return false;
      if (entry.size === 1) this.#slices.set(service, entry.values().next().value!);
    } else {
      if (entry.slice.name !== name) return false;
      this.#slices.delete(service);
    }
    this.#markPending(service, name);
    return true;
  }

  #markPending(service: string, name: string) {
    let p = this.#pending.get(service);
    if (!p) this.#pending.set(service, p = new Set());
    if (!p.has(name)) {
      p.add(name);
      this.#pendingSlices++;
    }
  }

  /** Number of distinct EndpointSlices changed since the last checkout. */
  get pendingCount(): number {
    return this.#pendingSlices;
  }

  /**
   * Merged endpoints of a Service's current slices (empty map when none); right after a
   * checkout, that is as of the checkout.
   */
  endpoints(service: string): ServiceEndpoints {
    const entry = this.#slices.get(service);
    if (entry === undefined) return EMPTY;
    return mergeSlices(entry instanceof Map ? entry.values() : [entry]);
  }

  /** Re-merges the Services with changed slices and returns their endpoints. */
  checkout(): Map<string, EndpointsChange> {
    const out = new Map<string, EndpointsChange>();
    for (const service of this.#pending.keys()) {
      out.set(service, { current: this.endpoints(service) });
    }
    this.#pending.clear();
    this.#pendingSlices = 0;
    return out;
  }

  /**
   * Returns, and forgets, the last-change-trigger-times (ms since epoch) of
   * the slice changes recorded since the previous call.
   */
  checkoutTriggerTimes(): number[] {
    const out = this.#triggerTimes;
    this.#triggerTimes = [];
    return out;
  }
}
