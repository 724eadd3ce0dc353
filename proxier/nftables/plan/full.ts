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
import type { Element } from "../../../ffi/nftables/types.ts";
import type { BuildContext } from "../context.ts";
import {
  decodeFrontend,
  diffFrontend,
  encodeFrontend,
  frontendClassChain,
  renderFrontend,
  withBucketsOf,
} from "../frontend.ts";
import { N, parseClassChain } from "../names.ts";
import {
  claimMatches,
  claimRecord,
  clusterIPElement,
  digestRules,
  ensureChain,
  hairpinElement,
  type Plan,
  recordMatches,
  retireChain,
  serviceRecord,
  setDigest,
  settleClasses,
} from "./common.ts";
import { type KernelView, LISTED_MAPS } from "./kernel_view.ts";
import type { ServiceRules } from "../service_rules.ts";
import { buildSkeleton, endpointMaps } from "../skeleton.ts";
import { TxBuilder } from "../tx_builder.ts";
import { Draft, UNKNOWN, type WrittenState } from "../written_state.ts";

/** Inputs of {@link planFull}. */
export interface FullInput {
  ctx: BuildContext;
  contextKey: string;
  /** Every service port's rules. */
  services: ReadonlyMap<string, ServiceRules>;
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
  for (const [map, nodePort] of LISTED_MAPS) {
    for (const el of view.elements.get(map) ?? []) {
      const key = el.key.join(" . ");
      let f = out.get(key);
      if (f === undefined) out.set(key, f = { nodePort, e: {} });
      f.comment ??= el.comment;
      const v = (el.value ?? []).join(" ");
      if (map === N.serviceIPs || map === N.serviceNodePorts) f.e.verdict = v;
      else if (map === N.firewallIPs) f.e.firewall = v;
      else f.e.noEndpoint = v;
    }
  }
  return out;
}

/** Plans a full sync (cold start, adoption, periodic or repair). */
export function planFull(written: WrittenState, input: FullInput): Plan {
  const { ctx, view, now } = input;
  const d = new Draft(written);
  const tb = new TxBuilder();
  tb.withTable();
  const cold = !view.tableExists;
  const fresh = !cold && (written.empty || input.regenerate === true);
  const kernelGens = generationsIn(view.chains);
  let gen = written.gen ?? 0;
  if (cold) gen = 0;
  else if (fresh) {
    gen = 0;
    while (kernelGens.has(gen) || gen === written.gen) gen++;
  }

  // Believe the kernel: chains it lacks are gone, chains it has are at least there.
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

  // Frontends as the kernel has them (encoded); bucket elements from the
  // written state unless they are in a generation we leave behind.
  const listed = listedFrontends(view);
  const believed = new Map<string, string>();
  for (const key of new Set([...d.keys("frontends"), ...listed.keys()])) {
    const rec = d.get("frontends", key);
    const head = listed.get(key)?.e ?? {};
    believed.set(
      key,
      fresh || cold || rec === undefined
        ? encodeFrontend({ ...head, buckets: [] })
        : withBucketsOf(head, rec.spec),
    );
  }
  const nodePortOf = (key: string) =>
    listed.get(key)?.nodePort ?? d.get("frontends", key)?.nodePort ?? false;

  // The skeleton, and with a fresh generation its empty bucket maps.
  const skeleton = buildSkeleton(ctx, gen);
  for (const s of skeleton.sets) {
    const digest = setDigest(s);
    if (d.get("sets", s.name) === digest && !fresh) continue;
    tb.head.set(s);
    d.set("sets", s.name, digest);
    if (d.has("staleSets", s.name)) d.set("staleSets", s.name, null);
  }
  if (fresh) { for (const m of endpointMaps(ctx, gen)) tb.head.flushSet(m); }
  const wanted = new Set<string>();
  for (const c of skeleton.chains) {
    ensureChain(d, c, tb.head);
    wanted.add(c.chain.name);
  }
  const nodePortIPs = listedKeys(view, N.nodePortIPs, []);
  for (const ip of nodePortIPs) {
    if (!skeleton.nodePortIPs.includes(ip)) tb.head.del(setElement(N.nodePortIPs, ip));
  }
  for (const ip of skeleton.nodePortIPs) {
    if (!nodePortIPs.has(ip)) tb.head.add(setElement(N.nodePortIPs, ip));
  }

  // Who wins each frontend: the lowest port id claiming it.
  const claims = new Map<string, string[]>();
  for (const [id, r] of input.services) {
    for (const f of r.frontends) {
      const c = claims.get(f.key);
      if (c === undefined) claims.set(f.key, [id]);
      else c.push(id);
    }
  }
  // Class chains the winners use: known before the first transaction, which creates them.
  const classes = new Map<string, number>();
  for (const [id, r] of input.services) {
    for (const f of r.frontends) {
      const ids = claims.get(f.key)!;
      if (ids.length > 1) ids.sort();
      if (ids[0] !== id) continue;
      const cls = frontendClassChain(f, gen);
      if (cls !== undefined) classes.set(cls, (classes.get(cls) ?? 0) + 1);
    }
  }
  for (const name of [...d.keys("classes")]) if (!classes.has(name)) d.set("classes", name, null);
  for (const [name, n] of classes) {
    if (d.get("classes", name) !== n) d.set("classes", name, n);
    wanted.add(name);
  }
  settleClasses(d, ctx, gen, now, tb);
  const maxOps = cold || fresh ? input.maxOps ?? 0 : 0;
  return transactions();

  // The rest runs as the transactions are taken, so only one is built at a time.
  function* transactions(): Plan {
    const clusterIPs = new Map<string, number>();
    const hairpin = new Map<string, number>();
    const listedClusterIPs = listedKeys(view, N.clusterIPs, cold ? [] : d.keys("clusterIPs"));
    const listedHairpin = listedKeys(view, N.hairpin, cold ? [] : d.keys("hairpin"));
    for (const [id, r] of input.services) {
      const u = tb.unit();
      for (const c of r.chains) {
        ensureChain(d, c, u);
        wanted.add(c.chain.name);
      }
      for (const s of r.sets) {
        const digest = setDigest(s);
        if (d.get("sets", s.name) !== digest) u.set(s);
        d.set("sets", s.name, digest);
        if (d.has("staleSets", s.name)) d.set("staleSets", s.name, null);
      }
      for (const f of r.frontends) {
        const ids = claims.get(f.key)!;
        if (ids.length > 1) ids.sort();
        if (ids[0] !== id) continue;
        const old = believed.get(f.key);
        const next = renderFrontend(f, gen, old);
        const spec = encodeFrontend(next);
        // What is listed carries its comment; what is not is only in buckets, which have none.
        const oldComment = listed.has(f.key) ? listed.get(f.key)!.comment : r.comment;
        if (old !== spec || oldComment !== r.comment) {
          const was = old === undefined ? undefined : decodeFrontend(old);
          diffFrontend(f.key, f.nodePort, gen, was, next, { old: oldComment, next: r.comment }, u);
        }
        believed.delete(f.key);
        if (!claimMatches(d.get("frontends", f.key), ids, f.nodePort, spec)) {
          d.set("frontends", f.key, claimRecord(ids, f.nodePort, spec));
        }
      }
      if (r.clusterIP) {
        const n = clusterIPs.get(r.clusterIP) ?? 0;
        clusterIPs.set(r.clusterIP, n + 1);
        if (n === 0 && !listedClusterIPs.has(r.clusterIP)) {
          u.add(clusterIPElement(r.clusterIP, r.clusterIPComment));
        }
      }
      for (const ip of r.hairpin) {
        const n = hairpin.get(ip) ?? 0;
        hairpin.set(ip, n + 1);
        if (n === 0 && !listedHairpin.has(ip)) u.add(hairpinElement(ip));
      }
      if (!recordMatches(d.get("services", id), r)) d.set("services", id, serviceRecord(r));
      const tx = tb.take(maxOps);
      if (tx !== undefined) yield tx;
    }

    // What nothing claims any more.
    for (const id of [...d.keys("services")]) {
      if (input.services.has(id)) continue;
      for (const name of d.get("services", id)!.sets) {
        d.set("sets", name, null);
        d.set("staleSets", name, now);
      }
      d.set("services", id, null);
    }
    for (const [key, old] of believed) {
      diffFrontend(
        key,
        nodePortOf(key),
        gen,
        decodeFrontend(old),
        undefined,
        { next: "" },
        tb.tail,
      );
      if (d.has("frontends", key)) d.set("frontends", key, null);
    }
    replaceCounts(
      d,
      "clusterIPs",
      clusterIPs,
      listedClusterIPs,
      (ip) => clusterIPElement(ip, ""),
      tb,
    );
    replaceCounts(d, "hairpin", hairpin, listedHairpin, hairpinElement, tb);

    // Unwanted chains and left generations go stale.
    for (const name of [...d.keys("chains")]) {
      if (!wanted.has(name)) retireChain(d, name, now, tb.tail);
    }
    // Sets nothing wants (older generations, affinity sets of ports gone while
    // we were down) go once the chains using them are gone.
    const wantedSets = new Set(skeleton.sets.map((s) => s.name));
    for (const r of input.services.values()) for (const s of r.sets) wantedSets.add(s.name);
    for (const name of [...d.keys("sets")]) {
      if (wantedSets.has(name)) continue;
      d.set("sets", name, null);
      if (!d.has("staleSets", name)) d.set("staleSets", name, now);
    }
    d.setMeta({ gen, contextKey: input.contextKey });
    yield* tb.finish();
    return d.delta;
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
