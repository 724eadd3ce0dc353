/**
 * EndpointSlices -> endpoints per Service port, with changes accumulated
 * between syncs (kube-proxy's EndpointsChangeTracker + EndpointSliceCache).
 * Slices are parsed and validated when their event arrives; a checkout
 * re-merges only the Services whose slices changed, so its cost follows the
 * number of changes, not the cluster size.
 *
 * @module
 */

import type { EndpointInfo } from "./model.ts";
import { type EndpointSlice, LABEL_SERVICE_NAME, sameVersion } from "./k8s_types.ts";
import { consoleLog, type LogFn } from "../net/log.ts";
import { sameStrings } from "../net/arrays.ts";
import { objectKey } from "./service_tracker.ts";
import { mergeSlices, type ParsedSlice, sharesAddress, type StoredSlice } from "./slice_merge.ts";
import { parseEndpointSlice } from "./slice_parse.ts";

export { mergeSlices, type ParsedSlice, type SlicePort } from "./slice_merge.ts";
export { parseEndpointSlice, portKey } from "./slice_parse.ts";

/** Annotation with the time of the change that caused the slice update. */
export const ANNOTATION_TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time";

/** Endpoints of one Service, by portKey() (slice_parse.ts); each list sorted by address then port. */
export type ServiceEndpoints = ReadonlyMap<string, readonly EndpointInfo[]>;

/** Whether two endpoints are identical in every field. */
export function sameEndpoint(a: EndpointInfo, b: EndpointInfo): boolean {
  // A Service's merged lists reuse the objects of its unchanged slices.
  if (a === b) return true;
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
  /** Slices changed since the last checkout, by Service key (a name, or a Set of several). */
  #pending = new Map<string, string | Set<string>>();
  #pendingSlices = 0;
  /** The last merge {@link portEndpoints} made, dropped at every slice change. */
  #merged: { service: string; ports: ServiceEndpoints } | undefined;
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
      this.#merged = undefined;
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
    this.#merged = undefined;
    const p = this.#pending.get(service);
    if (p === name || (p instanceof Set && p.has(name))) return;
    if (p === undefined) this.#pending.set(service, name);
    else if (p instanceof Set) p.add(name);
    else this.#pending.set(service, new Set([p, name]));
    this.#pendingSlices++;
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
    if (entry instanceof Map) return this.#mergedPorts(service, entry);
    // One slice: already sorted and de-duplicated; its lists are shared, not copied.
    const out = new Map<string, EndpointInfo[]>();
    for (const p of entry.slice.ports) if (p.endpoints.length > 0) out.set(p.key, p.endpoints);
    return out;
  }

  /**
   * The endpoints of one port (`key`: portKey()) of a Service's current slices, undefined when
   * none; a Service with one slice is read without building its map of ports.
   */
  portEndpoints(service: string, key: string): readonly EndpointInfo[] | undefined {
    const entry = this.#slices.get(service);
    if (entry === undefined) return undefined;
    if (entry instanceof Map) return this.#mergedPorts(service, entry).get(key);
    for (const p of entry.slice.ports) {
      if (p.key === key) return p.endpoints.length > 0 ? p.endpoints : undefined;
    }
    return undefined;
  }

  /** A Service's slices merged, once for all of its ports (until one of its slices changes). */
  #mergedPorts(service: string, slices: Map<string, StoredSlice>): ServiceEndpoints {
    if (this.#merged?.service !== service) {
      this.#merged = { service, ports: mergeSlices(slices.values()) };
    }
    return this.#merged.ports;
  }

  /** The Services whose slices changed since the last checkout; forgets them. */
  checkoutServices(): Iterable<string> {
    const changed = this.#pending;
    this.#pending = new Map();
    this.#pendingSlices = 0;
    return changed.keys();
  }

  /**
   * Re-merges the Services with changed slices and returns their endpoints (what the tests read;
   * ClusterState takes {@link checkoutServices} and reads ports as it needs them).
   */
  checkout(): Map<string, EndpointsChange> {
    const out = new Map<string, EndpointsChange>();
    for (const service of this.checkoutServices()) {
      out.set(service, { current: this.endpoints(service) });
    }
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
