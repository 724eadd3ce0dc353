/**
 * A frontend's elements: its dispatch verdict (membership of a class chain's
 * frontends set, or an element of a dispatch verdict map), one bucket
 * element per endpoint in the endpoint map of the current generation, and
 * the no-endpoint and firewall elements. Rendered from a
 * {@link FrontendSpec}, kept in the written state as one string, and diffed
 * element by element.
 *
 * @module
 */
import type { Element } from "../../ffi/nftables/types.ts";
import {
  BIG_FRONTEND,
  classChainName,
  classOfSet,
  classOfVerdict,
  classSetName,
  endpointsMapName,
  FIXED,
  type L4,
  usesLargeMap,
} from "./names.ts";
import type { FrontendSpec } from "./service_rules.ts";
import type { ElementSink } from "./tx_builder.ts";

/** The elements of one frontend, as written. */
export interface FrontendElements {
  /** Dispatch verdict, e.g. `goto dnat-3` or `goto service-…`. */
  verdict?: string;
  /** Bucket values (`ip . port`) in bucket order. */
  buckets: readonly string[];
  /** No-endpoint verdict (`drop`, `goto reject-chain`). */
  noEndpoint?: string;
  /** firewall-ips verdict (`goto firewall-…`). */
  firewall?: string;
}

const SEP = "\u0001";
const NO_BUCKETS: readonly string[] = [];

const BUCKET_CACHE_MAX = 64;

/**
 * The bucket arrays of the big frontends ({@link BIG_FRONTEND}) as last encoded, by frontend
 * key: a change to a Service of thousands of endpoints starts from the array instead of
 * splitting the encoding, and V8 has hashed its strings already (stableBuckets looks every one
 * up). An entry is used only for the very encoding it came from, so a stale or shared key costs
 * a split, never a wrong bucket.
 */
const lastBuckets = new Map<string, { spec: string; buckets: readonly string[] }>();

/**
 * One string holding a frontend's elements (for the written state); with `key`, a big
 * frontend's buckets are kept for the next render of that encoding.
 */
export function encodeFrontend(f: FrontendElements, key?: string): string {
  // join, not `+`: the written state keeps one spec per frontend, and a concatenation would
  // keep its parts as well (~140 bytes more per frontend, 4 MB at 30k Services).
  const spec = [f.verdict ?? "", f.noEndpoint ?? "", f.firewall ?? "", f.buckets.join(",")].join(
    SEP,
  );
  if (key !== undefined && f.buckets.length >= BIG_FRONTEND) {
    lastBuckets.delete(key);
    if (lastBuckets.size >= BUCKET_CACHE_MAX) lastBuckets.delete(lastBuckets.keys().next().value!);
    lastBuckets.set(key, { spec, buckets: f.buckets });
  }
  return spec;
}

/**
 * The encoding of a frontend whose verdict, no-endpoint and firewall
 * elements are `head`'s and whose buckets are those encoded in `spec`
 * (compares and patches without decoding).
 */
export function withBucketsOf(head: Omit<FrontendElements, "buckets">, spec: string): string {
  const prefix = encodeFrontend({ ...head, buckets: NO_BUCKETS });
  if (spec.startsWith(prefix)) return spec;
  // Flat (see encodeFrontend); a slice would also keep the old spec alive.
  return [prefix, spec.slice(spec.lastIndexOf(SEP) + 1)].join("");
}

/** The buckets of an encoded frontend (of `key`, if known), without decoding the rest. */
export function writtenBuckets(spec: string, key?: string): readonly string[] {
  const kept = key === undefined ? undefined : lastBuckets.get(key);
  if (kept !== undefined && kept.spec === spec) return kept.buckets;
  const b = spec.slice(spec.lastIndexOf(SEP) + 1);
  return b === "" ? NO_BUCKETS : b.split(",");
}

/** The inverse of {@link encodeFrontend} (`key`: the frontend's, to reuse its kept buckets). */
export function decodeFrontend(s: string, key?: string): FrontendElements {
  const [verdict, noEndpoint, firewall] = s.split(SEP, 3);
  const f: FrontendElements = { buckets: writtenBuckets(s, key) };
  if (verdict !== "") f.verdict = verdict;
  if (noEndpoint !== "") f.noEndpoint = noEndpoint;
  if (firewall !== "") f.firewall = firewall;
  return f;
}

/** The class chain a frontend dispatches to in generation `gen`, if it uses one. */
export function frontendClassChain(f: FrontendSpec, gen: number): string | undefined {
  const d = f.dispatch;
  return d !== undefined && "class" in d
    ? classChainName(d.class, d.proto, d.endpoints.length, gen)
    : undefined;
}

/**
 * `next` (the endpoints a frontend wants, in any order) placed so that as few buckets as possible
 * change from `prev` (what is written): an endpoint that stays keeps its bucket, a new one takes
 * a bucket that was freed, and when the list shrinks the endpoints in the last buckets move down
 * into the holes. One endpoint replaced in a 5000-endpoint Service is then one element, not every
 * bucket after it. `next` itself when nothing is written, or when it lists a value twice.
 */
export function stableBuckets(prev: readonly string[], next: readonly string[]): readonly string[] {
  if (prev.length === 0 || next.length === 0) return next;
  const want = new Set(next);
  if (want.size !== next.length) return next;
  const out: (string | undefined)[] = prev.map((v) => (want.delete(v) ? v : undefined));
  // What is left in `want` is new: into the holes first, in order, then at the end.
  const fresh = want.values();
  for (let i = 0, v = fresh.next(); !v.done; v = fresh.next()) {
    while (i < out.length && out[i] !== undefined) i++;
    out[i++] = v.value;
  }
  // Shrinking: the highest filled bucket moves into each hole below the new length.
  for (let i = 0, top = out.length - 1; i < next.length; i++) {
    if (out[i] !== undefined) continue;
    while (out[top] === undefined) top--;
    out[i] = out[top];
    out[top--] = undefined;
  }
  out.length = next.length;
  return out as string[];
}

/**
 * The elements a frontend wants in generation `gen`; with `written` (its buckets as written, see
 * {@link writtenBuckets}), endpoints keep the buckets they have ({@link stableBuckets}).
 */
export function renderFrontend(
  f: FrontendSpec,
  gen: number,
  written?: readonly string[],
): FrontendElements {
  const out: FrontendElements = { buckets: NO_BUCKETS };
  const d = f.dispatch;
  if (d !== undefined) {
    if ("class" in d) {
      out.verdict = `goto ${classChainName(d.class, d.proto, d.endpoints.length, gen)}`;
      out.buckets = written === undefined ? d.endpoints : stableBuckets(written, d.endpoints);
    } else {
      out.verdict = `goto ${d.chain}`;
    }
  }
  if (f.noEndpoint !== undefined) out.noEndpoint = f.noEndpoint;
  if (f.firewall !== undefined) out.firewall = `goto ${f.firewall}`;
  return out;
}

/** The protocol of a frontend key (`a . tcp . 80`, or `tcp . 30080` for NodePorts). */
export function frontendProto(key: string, nodePort: boolean): L4 {
  return key.split(" . ")[nodePort ? 0 : 1] as L4;
}

function mapElement(map: string, key: string[], value?: string, comment?: string): Element {
  const e: Element = { kind: "element", map, key };
  if (value !== undefined) e.value = [value];
  if (comment !== undefined) e.comment = comment;
  return e;
}

/**
 * Prefix of a class verdict listed in a dispatch verdict map rather than in its class set (a
 * table written before class sets): never rendered, so the element always differs and is moved.
 */
export const IN_VMAP = "vmap:";

/**
 * Where a frontend's dispatch verdict is held, and the value there: for a class chain, the
 * class's frontends set (an element with no value: no table validation at commit); for a chain
 * of the service port's own, the dispatch verdict map.
 */
function verdictPlace(nodePort: boolean, verdict: string): [string, string] {
  const cls = classOfVerdict(verdict);
  if (cls !== undefined) return [classSetName(cls), ""];
  const v = verdict.startsWith(IN_VMAP) ? verdict.slice(IN_VMAP.length) : verdict;
  return [nodePort ? FIXED.serviceNodePorts : FIXED.serviceIPs, v];
}

/** The element that holds a frontend's dispatch verdict (see {@link verdictPlace}). */
export function verdictElement(
  key: string,
  nodePort: boolean,
  verdict: string,
  comment?: string,
): Element {
  const [place, value] = verdictPlace(nodePort, verdict);
  return placeElement(place, key, value, comment);
}

/**
 * Where a frontend's dispatch elements are (the verdict map or class set, the
 * no-endpoint and firewall maps), each with the value it holds there (`""`
 * for a set's element): what drift checks and element repairs compare.
 */
export function frontendPlaces(nodePort: boolean, f: FrontendElements): [string, string][] {
  const out: [string, string][] = [];
  if (f.verdict !== undefined) out.push(verdictPlace(nodePort, f.verdict));
  if (f.noEndpoint !== undefined) {
    out.push([nodePort ? FIXED.noEndpointNodePorts : FIXED.noEndpointServices, f.noEndpoint]);
  }
  if (f.firewall !== undefined && !nodePort) out.push([FIXED.firewallIPs, f.firewall]);
  return out;
}

/** The element of frontend `key` in `place` (a class set, or a dispatch map holding `value`). */
export function placeElement(place: string, key: string, value: string, comment?: string): Element {
  if (classOfSet(place) === undefined) return mapElement(place, [key], value, comment);
  const e: Element = { kind: "element", set: place, key: [key] };
  if (comment !== undefined) e.comment = comment;
  return e;
}

/** The comments on a frontend's verdict elements before and after a change. */
export interface Comments {
  /** The comment as written before, if the frontend existed. */
  old?: string;
  /** The comment to write now. */
  next: string;
}

/**
 * Emits the element deletes and adds that turn frontend `key` from `old`
 * into `next` (either may be absent). A changed value is a delete plus an
 * add, and so is a changed comment (the port that writes it changed); `gen`
 * names the bucket map.
 */
export function diffFrontend(
  key: string,
  nodePort: boolean,
  gen: number,
  old: FrontendElements | undefined,
  next: FrontendElements | undefined,
  comments: Comments,
  sink: ElementSink,
): void {
  const sameComment = comments.old === comments.next;
  const one = (map: string, a: string | undefined, b: string | undefined, withComment: boolean) => {
    if (a === b && (sameComment || !withComment)) return;
    if (a !== undefined) sink.del(mapElement(map, [key]));
    if (b !== undefined) {
      sink.add(mapElement(map, [key], b, withComment ? comments.next : undefined));
    }
  };
  const ov = old?.verdict, nv = next?.verdict;
  if (ov !== nv || !sameComment) {
    if (ov !== undefined) sink.del(verdictElement(key, nodePort, ov));
    if (nv !== undefined) sink.add(verdictElement(key, nodePort, nv, comments.next));
  }
  const ob = old?.buckets ?? NO_BUCKETS, nb = next?.buckets ?? NO_BUCKETS;
  if (ob !== nb) {
    const proto = frontendProto(key, nodePort);
    const omap = endpointsMapName(nodePort, proto, gen, usesLargeMap(ob.length));
    const nmap = endpointsMapName(nodePort, proto, gen, usesLargeMap(nb.length));
    for (let i = 0; i < Math.max(ob.length, nb.length); i++) {
      // Across the large maps' threshold every bucket moves to the other map.
      if (ob[i] === nb[i] && omap === nmap) continue;
      if (ob[i] !== undefined) sink.del(mapElement(omap, [key, String(i)]));
      if (nb[i] !== undefined) sink.add(mapElement(nmap, [key, String(i)], nb[i]));
    }
  }
  one(
    nodePort ? FIXED.noEndpointNodePorts : FIXED.noEndpointServices,
    old?.noEndpoint,
    next?.noEndpoint,
    true,
  );
  if (!nodePort) one(FIXED.firewallIPs, old?.firewall, next?.firewall, true);
}
