/**
 * Random valid EndpointSlices and their changes, for the fuzzed-cluster-state test: several
 * slices per family, local, remote and node-less endpoints, every condition combination the
 * API allows (ready; serving+terminating; terminating; terminating with serving left out, as
 * controllers predating the serving condition write it; not ready; conditions left out), zone
 * and node hints (sometimes on only some endpoints), named target ports resolved per slice, and
 * rolling updates (ready -> terminating -> gone, new ones ready). An address is now and then
 * listed twice within one Service and family: a Pod IP reused while the old Pod terminates
 * (another Pod, in a sibling slice or the same one), or one Pod written into a sibling slice
 * with newer conditions before the old slice drops it (kubernetes#135266).
 *
 * @module
 */
import { familyLabel } from "../../net/family.ts";
import type { Obj } from "./reference_model.ts";
import { NET } from "./net.ts";
import { familiesOf, type Gen, PROXY_NAME } from "./service_gen.ts";

const SERVICE_NAME = "kubernetes.io/service-name";
const HEADLESS = "service.kubernetes.io/headless";

type State = "ready" | "terminating" | "terminatingNoServing" | "gone" | "notready" | "unset";

const CONDITIONS: Record<Exclude<State, "unset">, Obj> = {
  ready: { ready: true, serving: true, terminating: false },
  terminating: { ready: false, serving: true, terminating: true },
  terminatingNoServing: { ready: false, terminating: true },
  gone: { ready: false, serving: false, terminating: true },
  notready: { ready: false, serving: false, terminating: false },
};

function stateOf(ep: Obj): State {
  const c = ep.conditions;
  if (c === undefined) return "unset";
  if (c.ready) return "ready";
  if (c.terminating) {
    return c.serving === undefined ? "terminatingNoServing" : c.serving ? "terminating" : "gone";
  }
  return "notready";
}

function setState(ep: Obj, s: State): void {
  if (s === "unset") delete ep.conditions;
  else ep.conditions = { ...CONDITIONS[s] };
}

function randomState(g: Gen): State {
  const x = g.r();
  return x < 0.6
    ? "ready"
    : x < 0.7
    ? "terminating"
    : x < 0.74
    ? "terminatingNoServing"
    : x < 0.8
    ? "gone"
    : x < 0.92
    ? "notready"
    : "unset";
}

/** Zone and node hints as the controller would set them for the Service's traffic distribution. */
function setHints(g: Gen, svc: Obj, ep: Obj): void {
  const td = svc.spec.trafficDistribution;
  const zones = td !== undefined || g.chance(0.15);
  // Partial hinting (some endpoints without): proxies must then ignore hints.
  if (!zones || g.chance(0.1)) {
    delete ep.hints;
    return;
  }
  const hints: Obj = { forZones: [{ name: ep.zone ?? g.pick(NET.zones) }] };
  if (g.chance(0.2)) hints.forZones.push({ name: g.pick(NET.zones) });
  if (td === "PreferSameNode" || g.chance(0.1)) {
    hints.forNodes = [{ name: ep.nodeName ?? g.pick(NET.otherNodes) }];
  }
  hints.forZones = dedupe(hints.forZones);
  ep.hints = hints;
}

function dedupe(l: Obj[]): Obj[] {
  return l.filter((h, i) => l.findIndex((x) => x.name === h.name) === i);
}

/** Addresses already used by the Service in a family. */
function usedIPs(g: Gen, svc: Obj, fam: 4 | 6): Set<string> {
  const out = new Set<string>();
  for (const s of g.slicesOf(svc)) {
    if (s.addressType !== familyLabel(fam)) continue;
    for (const e of s.endpoints ?? []) out.add(e.addresses[0]);
  }
  return out;
}

function newEndpoint(g: Gen, svc: Obj, fam: 4 | 6, used: Set<string>): Obj | undefined {
  const x = g.r();
  const where = x < 0.4 ? "local" : x < 0.85 ? "remote" : "nameless";
  let ip = "";
  for (let tries = 0; tries < 20; tries++) {
    ip = g.podIP(fam, where);
    if (!used.has(ip)) break;
  }
  if (used.has(ip)) return undefined;
  used.add(ip);
  const ep: Obj = {
    // Rarely a second address: only the first counts.
    addresses: g.chance(0.03) ? [ip, g.podIP(fam, "nameless")] : [ip],
    targetRef: { kind: "Pod", namespace: svc.metadata.namespace, name: `pod-${g.serial()}` },
  };
  setState(ep, randomState(g));
  if (where === "local") {
    ep.nodeName = g.world.nodeName;
    ep.zone = g.world.node.metadata.labels["topology.kubernetes.io/zone"] ?? "zone-a";
  } else if (where === "remote") {
    ep.nodeName = g.pick(NET.otherNodes);
    ep.zone = g.pick(NET.zones);
  } else if (g.chance(0.5)) ep.zone = g.pick(NET.zones);
  setHints(g, svc, ep);
  return ep;
}

/** The slice's ports for the Service's ports; a named target port keeps its number per slice. */
function slicePorts(g: Gen, svc: Obj, prev: Obj[] = []): Obj[] {
  const out: Obj[] = [];
  for (const p of svc.spec.ports ?? []) {
    const old = prev.find((q) => (q.name ?? "") === (p.name ?? "") && q.protocol === p.protocol);
    const port = typeof p.targetPort === "number"
      ? p.targetPort
      : old?.port ?? g.pick([8080, 1, 65535, g.int(1, 65535)]);
    const sp: Obj = { protocol: p.protocol, port };
    // The name may be left out when empty.
    if (p.name !== undefined || g.chance(0.5)) sp.name = p.name ?? "";
    if (g.chance(0.1)) sp.appProtocol = "http";
    out.push(sp);
  }
  // A stale port the Service no longer has, now and then: ignored.
  if (g.chance(0.05)) out.push({ name: "old", protocol: "TCP", port: 9 });
  return out;
}

function newSlice(g: Gen, svc: Obj, fam: 4 | 6, count: number): Obj {
  const labels: Obj = {
    [SERVICE_NAME]: svc.metadata.name,
    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
  };
  if (svc.spec.clusterIP === "None") labels[HEADLESS] = "";
  if (svc.metadata.labels[PROXY_NAME] !== undefined) {
    labels[PROXY_NAME] = svc.metadata.labels[PROXY_NAME];
  }
  const used = usedIPs(g, svc, fam);
  const endpoints: Obj[] = [];
  for (let i = 0; i < count; i++) {
    const ep = newEndpoint(g, svc, fam, used);
    if (ep) endpoints.push(ep);
  }
  const suffix = (g.serial() * 7919).toString(36).slice(-5).padStart(5, "q");
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${svc.metadata.name}-${suffix}`,
      namespace: svc.metadata.namespace,
      labels,
      annotations: { "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z" },
      ownerReferences: [{ kind: "Service", name: svc.metadata.name }],
      managedFields: [{ manager: "kube-controller-manager", operation: "Update" }],
    },
    addressType: familyLabel(fam),
    endpoints,
    ports: slicePorts(g, svc),
  };
}

/** The first slices of a new Service: none to three per family (none for ExternalName). */
export function newSlices(g: Gen, svc: Obj): Obj[] {
  if (svc.spec.type === "ExternalName") return [];
  const out: Obj[] = [];
  for (const fam of familiesOf(svc)) {
    const n = g.pick([0, 1, 1, 2, 3]);
    for (let i = 0; i < n; i++) {
      // Now and then a big one: larger endpoint-selection chains.
      const s = newSlice(g, svc, fam, g.chance(0.03) ? g.int(20, 60) : g.int(0, 4));
      out.push(s);
      // Later slices must see this one's addresses.
      g.world.slices.set(`${s.metadata.namespace}/${s.metadata.name}`, s);
    }
  }
  for (const s of out) g.world.slices.delete(`${s.metadata.namespace}/${s.metadata.name}`);
  return out;
}

/** A rolling update in one slice: endpoints age (ready -> terminating -> gone), new ones arrive. */
export function rollEndpoints(g: Gen, svc: Obj): void {
  const slices = g.slicesOf(svc);
  if (slices.length === 0) {
    if (svc.spec.type === "ExternalName") return;
    const fams = familiesOf(svc);
    if (fams.length > 0) g.put("EndpointSlice", newSlice(g, svc, g.pick(fams), g.int(1, 3)));
    return;
  }
  // Now and then a rollout reuses an address or moves a Pod to a sibling slice.
  if (g.chance(0.2)) return duplicateAddress(g, slices);
  const slice = g.pick(slices);
  const kept: Obj[] = [];
  for (const ep of slice.endpoints ?? []) {
    const s = stateOf(ep);
    const x = g.r();
    if (s === "ready" && x < 0.3) setState(ep, "terminating");
    else if (s === "terminating" && x < 0.4) setState(ep, "gone");
    else if ((s === "terminating" && x < 0.7) || (s === "gone" && x < 0.6)) continue;
    else if (s === "notready" && x < 0.5) setState(ep, "ready");
    else if (x > 0.9) setState(ep, randomState(g));
    if (g.chance(0.2)) setHints(g, svc, ep);
    kept.push(ep);
  }
  const fam: 4 | 6 = slice.addressType === "IPv6" ? 6 : 4;
  const used = usedIPs(g, svc, fam);
  for (let i = g.int(0, 2); i > 0 && kept.length < 6; i--) {
    const ep = newEndpoint(g, svc, fam, used);
    if (ep) kept.push(ep);
  }
  slice.endpoints = kept;
  g.put("EndpointSlice", slice);
}

/** The controller catches up with the Service: ports, families, labels. */
export function syncSlicePorts(g: Gen, svc: Obj): void {
  const fams = svc.spec.type === "ExternalName" ? [] : familiesOf(svc);
  for (const s of g.slicesOf(svc)) {
    const fam = s.addressType === "IPv6" ? 6 : 4;
    if (!fams.includes(fam)) {
      g.remove("EndpointSlice", `${s.metadata.namespace}/${s.metadata.name}`);
      continue;
    }
    s.ports = slicePorts(g, svc, s.ports);
    g.put("EndpointSlice", s);
  }
  for (const fam of fams) {
    if (!g.slicesOf(svc).some((s) => s.addressType === familyLabel(fam))) {
      g.put("EndpointSlice", newSlice(g, svc, fam, g.int(0, 3)));
    }
  }
}

/**
 * Lists an existing address a second time: a new Pod that got the address of a terminating one
 * (another targetRef, live; the old copy turns terminating), or the same Pod written into a
 * sibling slice with new conditions. The two slices are written in either order.
 */
function duplicateAddress(g: Gen, slices: Obj[]): void {
  const from = g.pick(slices);
  if ((from.endpoints ?? []).length === 0) return;
  const siblings = slices.filter((s) => s.addressType === from.addressType);
  const to = g.chance(0.25) ? from : g.pick(siblings);
  const orig = g.pick(from.endpoints as Obj[]);
  const copy: Obj = structuredClone(orig);
  if (g.chance(0.6)) {
    // IP reuse: the old Pod is terminating, the new one (another Pod) is not.
    setState(orig, g.pick(["terminating", "terminatingNoServing", "gone"] as State[]));
    copy.targetRef = { ...orig.targetRef, name: `pod-${g.serial()}` };
    setState(copy, g.pick(["ready", "ready", "notready", "unset"] as State[]));
  } else {
    // The same Pod moving, its conditions possibly changed on the way.
    setState(copy, randomState(g));
  }
  (to.endpoints ??= []).push(copy);
  const order = g.chance(0.5) ? [from, to] : [to, from];
  for (const s of new Set(order)) g.put("EndpointSlice", s);
}

/** Adds a slice, deletes one, empties one, moves an endpoint between two, or lists one twice. */
export function reshapeSlices(g: Gen, svc: Obj): void {
  if (svc.spec.type === "ExternalName") return;
  const slices = g.slicesOf(svc);
  const x = g.r();
  if (slices.length > 0 && g.chance(0.2)) return duplicateAddress(g, slices);
  if (slices.length === 0 || x < 0.35) {
    const fams = familiesOf(svc);
    if (fams.length > 0) g.put("EndpointSlice", newSlice(g, svc, g.pick(fams), g.int(0, 4)));
  } else if (x < 0.6) {
    const s = g.pick(slices);
    g.remove("EndpointSlice", `${s.metadata.namespace}/${s.metadata.name}`);
  } else if (x < 0.75) {
    const s = g.pick(slices);
    s.endpoints = [];
    g.put("EndpointSlice", s);
  } else {
    // The same address moves to a sibling slice: within one step, listed once at the end.
    const from = g.pick(slices);
    const to = slices.find((s) => s !== from && s.addressType === from.addressType);
    if (to === undefined || (from.endpoints ?? []).length === 0) return;
    const [ep] = from.endpoints.splice(g.int(0, from.endpoints.length - 1), 1);
    (to.endpoints ??= []).push(ep);
    // Either order: the other one briefly lists the address twice, or not at all.
    const [a, b] = g.chance(0.5) ? [from, to] : [to, from];
    g.put("EndpointSlice", a);
    g.put("EndpointSlice", b);
  }
}
