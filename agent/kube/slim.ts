/**
 * Reduces API objects to the fields the proxier reads, at the informer edge,
 * before anything keeps them: no managedFields, no annotations or labels we
 * do not use, nothing of status but LoadBalancer ingress. Values are copied
 * as they are (never validated or coerced here): the trackers check them and
 * log what is malformed.
 *
 * @module
 */
import {
  LABEL_HEADLESS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
} from "../../proxier/k8s_types.ts";
import { intern } from "../../proxier/intern.ts";
import type { Stub } from "./watch_supervisor.ts";

/** The annotation feeding the network programming latency metric. */
const TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time";

/** An API object as plain JSON. */
export type Json = Record<string, unknown>;

const isObj = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);

/** The listed keys of `o` that are present. */
function pick(o: unknown, keys: readonly string[]): Json | undefined {
  if (!isObj(o)) return o === undefined ? undefined : o as Json;
  const out: Json = {};
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  return out;
}

/** `f` over an array's items; anything else as it is (the trackers report it). */
function each(v: unknown, f: (x: unknown) => unknown): unknown {
  return Array.isArray(v) ? v.map(f) : v;
}

function meta(m: unknown, labels: readonly string[], annotations: readonly string[]): Json {
  const out = pick(m, ["name", "namespace", "resourceVersion", "deletionTimestamp"]) ?? {};
  if (out.namespace !== undefined) out.namespace = intern(out.namespace);
  if (isObj(m)) {
    const l = pick(m.labels, labels);
    if (l !== undefined && Object.keys(l).length > 0) out.labels = l;
    const a = pick(m.annotations, annotations);
    if (a !== undefined && Object.keys(a).length > 0) out.annotations = a;
  }
  return out;
}

const SVC_LABELS = [LABEL_SERVICE_PROXY_NAME, LABEL_HEADLESS];
const SLICE_LABELS = [LABEL_SERVICE_NAME, LABEL_SERVICE_PROXY_NAME, LABEL_HEADLESS];

/** A Service as the service tracker reads it. */
export function slimService(o: Json): Json {
  const spec = isObj(o.spec) ? o.spec : undefined;
  const out: Json = { metadata: meta(o.metadata, SVC_LABELS, []) };
  if (spec !== undefined) {
    const s = pick(spec, [
      "type",
      "clusterIP",
      "clusterIPs",
      "externalIPs",
      "loadBalancerSourceRanges",
      "sessionAffinity",
      "sessionAffinityConfig",
      "externalTrafficPolicy",
      "internalTrafficPolicy",
      "healthCheckNodePort",
      "ipFamilies",
    ])!;
    if (spec.ports !== undefined) {
      s.ports = each(
        spec.ports,
        (p) => internFields(pick(p, ["name", "protocol", "port", "nodePort"])),
      );
    }
    out.spec = s;
  } else if (o.spec !== undefined) out.spec = o.spec;
  const lb = isObj(o.status) && isObj(o.status.loadBalancer) ? o.status.loadBalancer : undefined;
  if (lb?.ingress !== undefined) {
    out.status = { loadBalancer: { ingress: each(lb.ingress, (i) => pick(i, ["ip", "ipMode"])) } };
  }
  return out;
}

/** An EndpointSlice as the endpoints tracker reads it. */
export function slimEndpointSlice(o: Json): Json {
  const out: Json = { metadata: meta(o.metadata, SLICE_LABELS, [TRIGGER_TIME]) };
  if (o.addressType !== undefined) out.addressType = o.addressType;
  if (o.ports !== undefined) {
    out.ports = each(o.ports, (p) => internFields(pick(p, ["name", "protocol", "port"])));
  }
  if (o.endpoints !== undefined) {
    out.endpoints = each(o.endpoints, (e) => {
      const x = pick(e, ["addresses", "conditions", "nodeName", "zone", "hints", "targetRef"]);
      if (isObj(x)) {
        if (isObj(x.conditions)) {
          x.conditions = pick(x.conditions, ["ready", "serving", "terminating"]);
        }
        // Only what tells two Pods apart (the uid, else kind/namespace/name).
        if (isObj(x.targetRef)) {
          const r = x.targetRef;
          x.targetRef = r.uid ? { uid: r.uid } : pick(r, ["kind", "namespace", "name"]);
        }
        if (x.nodeName !== undefined) x.nodeName = intern(x.nodeName);
        if (x.zone !== undefined) x.zone = intern(x.zone);
      }
      return x;
    });
  }
  return out;
}

function internFields(p: Json | undefined): Json | undefined {
  if (isObj(p)) {
    if (p.name !== undefined) p.name = intern(p.name);
    if (p.protocol !== undefined) p.protocol = intern(p.protocol);
  }
  return p;
}

/**
 * What the informer keeps of a delivered Service or EndpointSlice to hand back as the old
 * object: its identity, version and the label tying a slice to its Service.
 */
export function identityOf(o: Json): Json {
  const m = isObj(o.metadata) ? o.metadata : {};
  const out = pick(m, ["name", "namespace", "resourceVersion"]) ?? {};
  const svc = isObj(m.labels) ? m.labels[LABEL_SERVICE_NAME] : undefined;
  if (svc !== undefined) out.labels = { [LABEL_SERVICE_NAME]: svc };
  return { metadata: out };
}

/** Separates the resourceVersion from the Service name in an {@link identityStub} string. */
const SEP = "\u0000";

/**
 * {@link identityOf} kept as one string per object by the Service and EndpointSlice informers
 * (the resourceVersion, and a slice's Service name): 30k Services and their slices kept ~5 MB
 * of stub objects. Rebuilt into the same stub when an update or delete needs the old object.
 */
export const identityStub: Stub = {
  pack(o: Json): string {
    const m = isObj(o.metadata) ? o.metadata : {};
    const rv = typeof m.resourceVersion === "string" ? m.resourceVersion : "";
    const svc = isObj(m.labels) ? m.labels[LABEL_SERVICE_NAME] : undefined;
    if (typeof svc !== "string") return rv;
    const packed = rv + SEP + svc;
    // Flattened now (reading it as a number does), so the parts it was joined from can go.
    void Number(packed);
    return packed;
  },
  version(packed: string): string | undefined {
    const at = packed.indexOf(SEP);
    const rv = at < 0 ? packed : packed.slice(0, at);
    return rv === "" ? undefined : rv;
  },
  unpack(key: string, packed: string): Json {
    const slash = key.indexOf("/");
    const meta: Json = {};
    if (slash > 0) meta.namespace = key.slice(0, slash);
    if (slash + 1 < key.length) meta.name = key.slice(slash + 1);
    const at = packed.indexOf(SEP);
    const rv = at < 0 ? packed : packed.slice(0, at);
    if (rv !== "") meta.resourceVersion = rv;
    if (at >= 0) meta.labels = { [LABEL_SERVICE_NAME]: packed.slice(at + 1) };
    return { metadata: meta };
  },
};

/** This node as the proxier and the health server read it. */
export function slimNode(o: Json): Json {
  const m = isObj(o.metadata) ? o.metadata : {};
  // One object: all its labels (topology reads the zone) are cheap to keep.
  const out: Json = { metadata: { ...meta(m, [], []), ...(m.labels ? { labels: m.labels } : {}) } };
  const spec = pick(o.spec, ["podCIDR", "podCIDRs", "taints"]);
  if (spec !== undefined) out.spec = spec;
  const status = pick(o.status, ["addresses"]);
  if (status !== undefined) out.status = status;
  return out;
}

/** A ServiceCIDR as the cluster state reads it. */
export function slimServiceCIDR(o: Json): Json {
  const out: Json = { metadata: meta(o.metadata, [], []) };
  const spec = pick(o.spec, ["cidrs"]);
  if (spec !== undefined) out.spec = spec;
  return out;
}
