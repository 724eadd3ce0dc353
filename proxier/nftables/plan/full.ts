/**
 * Full sync planning: every service port's rules against what the kernel
 * has. Pure: the written state, a cheap view of the kernel and all rules in;
 * transactions and the delta to commit out.
 *
 * The view has chain names and the dispatch maps' elements, not the endpoint
 * bucket maps: listing those costs seconds at scale (the kernel's dump walks
 * the hash table again per netlink message). So bucket elements are taken
 * from the written state, and when that cannot be trusted (no state after a
 * restart, or after a failed sync) the plan moves every frontend to a fresh
 * generation of bucket maps instead: new maps and class chains are filled,
 * each frontend's verdict is re-pointed at them (a service at a time, so
 * traffic never sees a half-programmed service), and the old generation is
 * emptied and deleted later. That is also how tables of an older layout or of
 * upstream kube-proxy are adopted without a gap.
 *
 * @module
 */
import type { Element, Transaction } from "../../../ffi/nftables/types.ts";
import type { BuildContext } from "../context.ts";
import {
  decodeFrontend,
  diffFrontend,
  encodeFrontend,
  frontendClassChain,
  IN_VMAP,
  renderFrontend,
  withBucketsOf,
  writtenBuckets,
} from "../frontend.ts";
import { classOfSet, classOfVerdict, classSetName, FIXED, parseClassChain } from "../names.ts";
import {
  claimMatches,
  claimRecord,
  clusterIPElement,
  digestRules,
  ensureChain,
  hairpinElement,
  type Plan,
  readyNeighbours,
  recordMatches,
  retireChain,
  serviceRecord,
  setDigest,
  settleClasses,
} from "./common.ts";
import { type KernelView, LISTED_MAPS } from "./kernel_view.ts";
import type { ServiceRules } from "../service_rules.ts";
import { buildSkeleton, endpointMaps, type Skeleton } from "../skeleton.ts";
import { TxBuilder, type Unit } from "../tx_builder.ts";
import { Draft, UNKNOWN, type WrittenState } from "../written_state.ts";

/** Inputs of {@link planFull}. */
export interface FullInput {
  /** This family's node, config and names. */
  ctx: BuildContext;
  /** The context's key: when it differs from the written one, every rule is rewritten. */
  contextKey: string;
  /**
   * Every service port's rules. The plan takes this map: a port's entry goes once its unit is
   * planned, so a cold start never holds every port's rules beside the whole draft.
   */
  services: Map<string, ServiceRules>;
  /** What was read back from the kernel. */
  view: KernelView;
  /** Move to a fresh generation even though the written state is there (after a failure). */
  regenerate?: boolean;
  /** Engine clock (ms). */
  now: number;
  /** With a cold start or a regeneration: about this many operations per transaction (0 = one). */
  maxOps?: number;
}

/** Generations whose class chains exist among `chains`. */
export function generationsIn(chains: Iterable<string>): Set<number> {
  const gens = new Set<number>();
  for (const c of chains) {
    const p = parseClassChain(c);
    if (p !== undefined) gens.add(p.gen);
  }
  return gens;
}

/** A frontend's elements as listed, and the comment they carry. */
interface Listed {
  nodePort: boolean;
  e: { verdict?: string; noEndpoint?: string; firewall?: string };
  comment?: string;
}

/** The frontend elements the kernel view shows, by key (bucket maps are not listed). */
function listedFrontends(view: KernelView): Map<string, Listed> {
  const out = new Map<string, Listed>();
  const entry = (key: string, nodePort: boolean, comment: string | undefined) => {
    let f = out.get(key);
    if (f === undefined) out.set(key, f = { nodePort, e: {} });
    f.comment ??= comment;
    return f;
  };
  for (const [map, nodePort] of LISTED_MAPS) {
    for (const el of view.elements.get(map) ?? []) {
      const f = entry(el.key.join(" . "), nodePort, el.comment);
      const v = (el.value ?? []).join(" ");
      if (map === FIXED.serviceIPs || map === FIXED.serviceNodePorts) {
        // A class verdict in the map is of the layout before class sets: to be moved.
        f.e.verdict = classOfVerdict(v) === undefined ? v : IN_VMAP + v;
      } else if (map === FIXED.firewallIPs) f.e.firewall = v;
      else f.e.noEndpoint = v;
    }
  }
  for (const [name, els] of view.elements) {
    const cls = classOfSet(name);
    if (cls === undefined) continue;
    const nodePort = parseClassChain(cls)!.kind === "nodeport";
    for (const el of els) {
      const f = entry(el.key.join(" . "), nodePort, el.comment);
      f.e.verdict ??= `goto ${cls}`;
    }
  }
  return out;
}

/** True when the view listed the place that holds `verdict` of a frontend. */
function verdictListed(view: KernelView, nodePort: boolean, verdict: string | undefined): boolean {
  const cls = classOfVerdict(verdict);
  if (cls !== undefined) return view.elements.has(classSetName(cls));
  return view.elements.has(nodePort ? FIXED.serviceNodePorts : FIXED.serviceIPs);
}

/**
 * A targeted check's belief about a frontend: as written, except for the
 * fields whose dispatch maps or class sets the check listed, which are as listed.
 */
function asListed(
  spec: string,
  nodePort: boolean,
  head: Listed["e"] | undefined,
  view: KernelView,
): string {
  const maps = LISTED_MAPS.filter(([m, np]) => np === nodePort && view.elements.has(m));
  const f = decodeFrontend(spec);
  const verdict = verdictListed(view, nodePort, f.verdict);
  if (maps.length === 0 && !verdict) return spec;
  // A verdict listed elsewhere than where it was written is believed only with nothing written.
  if (verdict || f.verdict === undefined) f.verdict = head?.verdict;
  for (const [map] of maps) {
    if (map === FIXED.firewallIPs) f.firewall = head?.firewall;
    else if (map !== FIXED.serviceIPs && map !== FIXED.serviceNodePorts) {
      f.noEndpoint = head?.noEndpoint;
    }
  }
  return encodeFrontend(f);
}

/** What the steps of a full plan share. */
interface FullState {
  readonly input: FullInput;
  readonly d: Draft;
  readonly tb: TxBuilder;
  /** No table in the kernel: everything is written from scratch. */
  readonly cold: boolean;
  /** Moving to a fresh generation of bucket maps. */
  readonly fresh: boolean;
  /** Generation of the bucket maps and class chains written. */
  readonly gen: number;
  /** Chains the plan keeps; the others go stale. */
  readonly wanted: Set<string>;
  /** Frontends as the kernel lists them. */
  readonly listed: Map<string, Listed>;
  /** Frontend elements believed in the kernel (encoded); those no port takes are deleted. */
  readonly believed: Map<string, string>;
  /** Each frontend's claimers, sorted: the first wins and writes it. */
  readonly claims: Map<string, string[]>;
  readonly skeleton: Skeleton;
  /** Service ports planned so far (their rules are dropped from `input.services`). */
  readonly planned: Set<string>;
  /** Sets the planned ports use: kept by the retire step. */
  readonly portSets: Set<string>;
}

/** ClusterIP and hairpin counts as the services step took them, and what the kernel listed. */
interface SharedCounts {
  clusterIPs: Map<string, number>;
  hairpin: Map<string, number>;
  listedClusterIPs: Set<string>;
  listedHairpin: Set<string>;
}

/**
 * Plans a full sync (cold start, adoption, periodic or repair), in four
 * steps: adopt what the kernel has, the skeleton and class chains (the first
 * transaction's head), the services (a unit each, cut into transactions as
 * they are taken), and the retirement of what nothing wants any more.
 */
export function planFull(written: WrittenState, input: FullInput): Plan {
  const s = adopt(written, input);
  planSkeleton(s);
  planClasses(s);
  return transactions(s);
}

/** The steps that run as the transactions are taken, so only one is built at a time. */
function* transactions(s: FullState): Plan {
  const counts = yield* planServices(s);
  retire(s, counts);
  s.d.setMeta({ gen: s.gen, contextKey: s.input.contextKey });
  yield* s.tb.finish();
  return s.d.delta;
}

/** The generation a full sync writes: a fresh one unless the written state is trusted. */
function generation(written: WrittenState, view: KernelView, cold: boolean, fresh: boolean) {
  if (cold) return 0;
  if (!fresh) return written.gen ?? 0;
  const kernelGens = generationsIn(view.chains);
  let gen = 0;
  while (kernelGens.has(gen) || gen === written.gen) gen++;
  return gen;
}

/**
 * Adopt: the draft believes the kernel (chains and sets it lacks are gone,
 * those it has are at least there, a chain whose rule count changed is of
 * unknown content), and each frontend is believed as listed, with bucket
 * elements from the written state unless the generation is left behind.
 */
function adopt(written: WrittenState, input: FullInput): FullState {
  const { view } = input;
  const d = new Draft(written);
  const tb = new TxBuilder();
  tb.withTable();
  const cold = !view.tableExists;
  const fresh = !cold && (written.empty || input.regenerate === true);
  const gen = generation(written, view, cold, fresh);
  believeKernel(d, view);
  const listed = listedFrontends(view);
  const believed = new Map<string, string>();
  for (const key of new Set([...d.keys("frontends"), ...listed.keys()])) {
    const rec = d.get("frontends", key);
    const head = listed.get(key)?.e;
    let spec: string;
    if (fresh || cold || rec === undefined) spec = encodeFrontend({ ...head, buckets: [] });
    else if (view.partial) spec = asListed(rec.spec, rec.nodePort, head, view);
    else spec = withBucketsOf(head ?? {}, rec.spec);
    believed.set(key, spec);
  }
  const skeleton = buildSkeleton(input.ctx, gen);
  const claims = claimsOf(input.services);
  return {
    ...{ input, d, tb, cold, fresh, gen, wanted: new Set<string>(), listed, believed, claims },
    ...{ skeleton, planned: new Set<string>(), portSets: new Set<string>() },
  };
}

/** The draft's chains and sets as the kernel view has them. */
function believeKernel(d: Draft, view: KernelView): void {
  const inKernel = new Set(view.chains);
  for (const name of [...d.keys("chains")]) if (!inKernel.has(name)) d.set("chains", name, null);
  for (const name of [...d.keys("staleChains")]) {
    if (!inKernel.has(name)) d.set("staleChains", name, null);
  }
  for (const name of inKernel) if (!d.has("chains", name)) d.set("chains", name, UNKNOWN);
  // A chain holding more or fewer rules than we wrote was changed by someone: rewrite it, as
  // kube-proxy's full sync flushes its chains (the table is ours).
  const counts = view.ruleCounts;
  if (counts !== undefined) {
    for (const name of [...d.keys("chains")]) {
      const digest = d.get("chains", name)!;
      if (digest === UNKNOWN || !counts.has(name)) continue;
      if (counts.get(name) !== digestRules(digest)) d.set("chains", name, UNKNOWN);
    }
  }
  const setsInKernel = new Set(view.sets);
  for (const name of [...d.keys("sets")]) if (!setsInKernel.has(name)) d.set("sets", name, null);
  for (const name of setsInKernel) if (!d.has("sets", name)) d.set("sets", name, UNKNOWN);
  for (const name of [...d.keys("staleSets")]) {
    if (!setsInKernel.has(name)) d.set("staleSets", name, null);
  }
}

/** Who claims each frontend, sorted (the plan's own arrays): the lowest port id wins. */
function claimsOf(services: ReadonlyMap<string, ServiceRules>): Map<string, string[]> {
  const claims = new Map<string, string[]>();
  for (const [id, r] of services) {
    for (const f of r.frontends) {
      const c = claims.get(f.key);
      if (c === undefined) claims.set(f.key, [id]);
      else c.push(id);
    }
  }
  for (const ids of claims.values()) if (ids.length > 1) ids.sort();
  return claims;
}

/** Skeleton: the shared sets and chains, with a fresh generation its empty bucket maps. */
function planSkeleton(s: FullState): void {
  const { d, tb, skeleton, fresh } = s;
  for (const set of skeleton.sets) {
    const digest = setDigest(set);
    if (d.get("sets", set.name) === digest && !fresh) continue;
    tb.head.set(set);
    d.set("sets", set.name, digest);
    if (d.has("staleSets", set.name)) d.set("staleSets", set.name, null);
  }
  if (fresh) { for (const m of endpointMaps(s.input.ctx, s.gen)) tb.head.flushSet(m); }
  for (const c of skeleton.chains) {
    ensureChain(d, c, tb.head);
    s.wanted.add(c.chain.name);
  }
  const nodePortIPs = listedKeys(s.input.view, FIXED.nodePortIPs, []);
  for (const ip of nodePortIPs) {
    if (!skeleton.nodePortIPs.includes(ip)) tb.head.del(setElement(FIXED.nodePortIPs, ip));
  }
  for (const ip of skeleton.nodePortIPs) {
    if (!nodePortIPs.has(ip)) tb.head.add(setElement(FIXED.nodePortIPs, ip));
  }
}

/** Class chains the winners use: known before the first transaction, which creates them. */
function planClasses(s: FullState): void {
  const { d, input, claims } = s;
  const classes = new Map<string, number>();
  for (const [id, r] of input.services) {
    for (const f of r.frontends) {
      if (claims.get(f.key)![0] !== id) continue;
      const cls = frontendClassChain(f, s.gen);
      if (cls !== undefined) classes.set(cls, (classes.get(cls) ?? 0) + 1);
    }
  }
  for (const name of [...d.keys("classes")]) if (!classes.has(name)) d.set("classes", name, null);
  for (const [name, n] of classes) {
    if (d.get("classes", name) !== n) d.set("classes", name, n);
    s.wanted.add(name);
  }
  readyNeighbours(d, s.gen);
  for (const name of settleClasses(d, input.ctx, s.gen, input.now, s.tb, true)) s.wanted.add(name);
}

/** Services: a unit per service port, yielded in transactions of about `maxOps` operations. */
function* planServices(s: FullState): Generator<Transaction, SharedCounts, undefined> {
  const { d, input, cold } = s;
  const maxOps = cold || s.fresh ? input.maxOps ?? 0 : 0;
  const counts: SharedCounts = {
    clusterIPs: new Map(),
    hairpin: new Map(),
    listedClusterIPs: listedKeys(input.view, FIXED.clusterIPs, cold ? [] : d.keys("clusterIPs")),
    listedHairpin: listedKeys(input.view, FIXED.hairpin, cold ? [] : d.keys("hairpin")),
  };
  for (const [id, r] of input.services) {
    planService(s, id, r, s.tb.unit(), counts);
    // What the plan keeps of it is in the draft and the transaction now.
    input.services.delete(id);
    s.planned.add(id);
    const tx = s.tb.take(maxOps);
    if (tx !== undefined) yield tx;
  }
  return counts;
}

/** One service port's chains, sets, the frontends it wins and its shared elements. */
function planService(s: FullState, id: string, r: ServiceRules, u: Unit, c: SharedCounts): void {
  const { d } = s;
  for (const ch of r.chains) {
    ensureChain(d, ch, u);
    s.wanted.add(ch.chain.name);
  }
  for (const set of r.sets) {
    s.portSets.add(set.name);
    const digest = setDigest(set);
    if (d.get("sets", set.name) !== digest) u.set(set);
    d.set("sets", set.name, digest);
    if (d.has("staleSets", set.name)) d.set("staleSets", set.name, null);
  }
  for (const f of r.frontends) {
    const ids = s.claims.get(f.key)!;
    if (ids[0] !== id) continue;
    const old = s.believed.get(f.key);
    const next = renderFrontend(
      f,
      s.gen,
      old === undefined ? undefined : writtenBuckets(old, f.key),
    );
    const spec = encodeFrontend(next, f.key);
    // What is listed carries its comment; what is not is only in buckets, which have none.
    const oldComment = s.listed.has(f.key) ? s.listed.get(f.key)!.comment : r.comment;
    if (old !== spec || oldComment !== r.comment) {
      const was = old === undefined ? undefined : decodeFrontend(old, f.key);
      diffFrontend(f.key, f.nodePort, s.gen, was, next, { old: oldComment, next: r.comment }, u);
    }
    s.believed.delete(f.key);
    if (!claimMatches(d.get("frontends", f.key), ids, f.nodePort, spec)) {
      d.set("frontends", f.key, claimRecord(ids, f.nodePort, spec));
    }
  }
  if (r.clusterIP) {
    const n = c.clusterIPs.get(r.clusterIP) ?? 0;
    c.clusterIPs.set(r.clusterIP, n + 1);
    if (n === 0 && !c.listedClusterIPs.has(r.clusterIP)) {
      u.add(clusterIPElement(r.clusterIP, r.clusterIPComment));
    }
  }
  for (const ip of r.hairpin) {
    const n = c.hairpin.get(ip) ?? 0;
    c.hairpin.set(ip, n + 1);
    if (n === 0 && !c.listedHairpin.has(ip)) u.add(hairpinElement(ip));
  }
  if (!recordMatches(d.get("services", id), r)) d.set("services", id, serviceRecord(r));
}

/** Retire: what nothing claims any more goes (elements now, chains and sets stale). */
function retire(s: FullState, c: SharedCounts): void {
  const { d, tb, input } = s;
  const { now } = input;
  for (const id of [...d.keys("services")]) {
    if (s.planned.has(id)) continue;
    for (const name of d.get("services", id)!.sets) {
      d.set("sets", name, null);
      d.set("staleSets", name, now);
    }
    d.set("services", id, null);
  }
  for (const [key, old] of s.believed) {
    const nodePort = s.listed.get(key)?.nodePort ?? d.get("frontends", key)?.nodePort ?? false;
    diffFrontend(key, nodePort, s.gen, decodeFrontend(old), undefined, { next: "" }, tb.tail);
    if (d.has("frontends", key)) d.set("frontends", key, null);
  }
  const clusterIPElementOf = (ip: string) => clusterIPElement(ip, "");
  replaceCounts(d, "clusterIPs", c.clusterIPs, c.listedClusterIPs, clusterIPElementOf, tb);
  replaceCounts(d, "hairpin", c.hairpin, c.listedHairpin, hairpinElement, tb);
  // Unwanted chains and left generations go stale.
  for (const name of [...d.keys("chains")]) {
    if (!s.wanted.has(name)) retireChain(d, name, now, tb.tail);
  }
  // Sets nothing wants (older generations, affinity sets of ports gone while
  // we were down) go once the chains using them are gone.
  const wantedSets = new Set(s.portSets);
  for (const set of s.skeleton.sets) wantedSets.add(set.name);
  // A class chain's set stays while the chain does (stale.ts deletes them together).
  for (const name of [...d.keys("chains"), ...d.keys("staleChains")]) {
    if (parseClassChain(name) !== undefined) wantedSets.add(classSetName(name));
  }
  for (const name of [...d.keys("sets")]) {
    if (wantedSets.has(name)) continue;
    d.set("sets", name, null);
    if (!d.has("staleSets", name)) d.set("staleSets", name, now);
  }
}

/** The keys of a listed set, or (when it was not listed) those the draft believes in. */
function listedKeys(view: KernelView, name: string, believed: Iterable<string>): Set<string> {
  const els = view.elements.get(name);
  return new Set(els === undefined ? believed : els.map((e) => e.key[0]));
}

function setElement(set: string, key: string): Element {
  return { kind: "element", set, key: [key] };
}

/** Replaces a counter field with freshly counted values, deleting elements nothing counts. */
function replaceCounts(
  d: Draft,
  field: "clusterIPs" | "hairpin",
  counts: ReadonlyMap<string, number>,
  present: ReadonlySet<string>,
  element: (ip: string) => Element,
  tb: TxBuilder,
): void {
  for (const ip of present) if (!counts.has(ip)) tb.tail.del(element(ip));
  for (const ip of [...d.keys(field)]) if (!counts.has(ip)) d.set(field, ip, null);
  for (const [ip, n] of counts) if (d.get(field, ip) !== n) d.set(field, ip, n);
}
