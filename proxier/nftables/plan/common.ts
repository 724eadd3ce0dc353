/**
 * Pieces both planners share: the {@link Plan} they return, service
 * records, chain digests, claim bookkeeping for frontends several service
 * ports want, class chains, and the element changes of shared sets.
 *
 * @module
 */
import { sameKeys, sameStrings } from "../../../net/arrays.ts";
import type { Element, Set as NftSet, Transaction } from "../../../ffi/nftables/types.ts";
import type { BuildContext } from "../context.ts";
import {
  classNeighbours,
  classSetName,
  FIXED,
  isReservedClass,
  parseClassChain,
  reservedClasses,
} from "../names.ts";
import type { ServiceRules } from "../service_rules.ts";
import {
  type ChainSpec,
  classChain,
  classDispatchChains,
  classSet,
  dispatchedClasses,
} from "../skeleton.ts";
import type { TxBuilder, Unit } from "../tx_builder.ts";
import {
  type Delta,
  type Draft,
  type FrontendRecord,
  type ServiceRecord,
  UNKNOWN,
} from "../written_state.ts";

/**
 * A planned sync: a generator of the transactions to run in order, whose
 * return value is the delta to commit. A full sync's transactions are built
 * as they are taken (only one is held at a time) and keep writing to the
 * delta, so it is handed out only once the last one was taken: a caller
 * cannot commit half a plan. (A `for...of` drops the return value.)
 */
export type Plan = Generator<Transaction, Delta, undefined>;

/** A plan of transactions already built, returning `delta`. */
export function* builtPlan(txs: Iterable<Transaction>, delta: Delta): Plan {
  yield* txs;
  return delta;
}

const NONE: readonly string[] = [];

/** What the written state keeps of a service port's rules. */
export function serviceRecord(r: ServiceRules): ServiceRecord {
  return {
    frontends: r.frontends.map((f) => f.key),
    clusterIP: r.clusterIP,
    hairpin: r.hairpin.length === 0 ? NONE : r.hairpin,
    chains: r.chains.length === 0 ? NONE : r.chains.map((c) => c.chain.name),
    sets: r.sets.length === 0 ? NONE : r.sets.map((s) => s.name),
  };
}

/** True when `a` records exactly what rules `r` claim (no allocation: full syncs call it per port). */
export function recordMatches(a: ServiceRecord | undefined, r: ServiceRules): boolean {
  if (a === undefined || a.clusterIP !== r.clusterIP) return false;
  return sameKeys(a.frontends, r.frontends, (f) => f.key) && sameStrings(a.hairpin, r.hairpin) &&
    sameKeys(a.chains, r.chains, (c) => c.chain.name) && sameKeys(a.sets, r.sets, (s) => s.name);
}

/** True when a frontend record already says: claimed by `ids` (sorted), with `spec` written. */
export function claimMatches(
  a: FrontendRecord | undefined,
  ids: readonly string[],
  nodePort: boolean,
  spec: string,
): boolean {
  if (a === undefined || a.owner !== ids[0] || a.spec !== spec || a.nodePort !== nodePort) {
    return false;
  }
  const others = a.others ?? [];
  return others.length === ids.length - 1 && others.every((v, i) => v === ids[i + 1]);
}

/** A chain's content as the written state keeps it. */
export function chainDigest(c: ChainSpec): string {
  const { chain } = c;
  const head = chain.hook === undefined
    ? ""
    : `${chain.type} ${chain.hook} ${chain.priority ?? 0} ${chain.policy ?? ""}\n`;
  return head + c.rules.join("\n");
}

const BASE_HEAD = /^(filter|nat|route) [a-z]+ -?\d+ (accept|drop)?\n/;

/** How many rules a {@link chainDigest} stands for. */
export function digestRules(digest: string): number {
  const body = digest.replace(BASE_HEAD, "");
  return body === "" ? 0 : body.split("\n").length;
}

/** A set declaration as the written state keeps it. */
export function setDigest(s: NftSet | { kind: "map"; type: string; dataType: string }): string {
  return JSON.stringify(s);
}

/**
 * Writes chain `c` unless the draft says it already holds exactly these
 * rules: `add` (+ `flush` when it may hold other rules) and the rules. A
 * base chain of unknown content is re-created, since `add` cannot change a
 * hook or priority left by another version.
 */
export function ensureChain(d: Draft, c: ChainSpec, u: Unit): void {
  const name = c.chain.name;
  const digest = chainDigest(c);
  const known = d.get("chains", name);
  if (known === digest) return;
  for (const counter of c.counters ?? []) u.counter(counter);
  if (known === UNKNOWN && c.chain.hook !== undefined) {
    u.recreateBaseChain(c.chain, c.rules);
  } else {
    u.chain(c.chain, c.rules, known !== undefined);
  }
  d.set("chains", name, digest);
  if (d.has("staleChains", name)) d.set("staleChains", name, null);
}

/** Marks an unwanted chain stale: emptied now (dropping its references), deleted later. */
export function retireChain(d: Draft, name: string, now: number, u: Unit): void {
  if (!d.has("chains", name)) return;
  u.flushChain(name);
  d.set("chains", name, null);
  d.set("staleChains", name, now);
}

/** A frontend's claimers, lowest id first (the winner). */
export function claimers(rec: FrontendRecord | undefined): string[] {
  if (rec === undefined || rec.owner === "") return rec?.others ? [...rec.others] : [];
  return [rec.owner, ...(rec.others ?? [])];
}

/** The record for a frontend claimed by `ids` (sorted), with the winner's elements. */
export function claimRecord(
  ids: readonly string[],
  nodePort: boolean,
  spec: string,
): FrontendRecord {
  const rec: FrontendRecord = { owner: ids[0], nodePort, spec };
  if (ids.length > 1) rec.others = ids.slice(1);
  return rec;
}

/** Element of `cluster-ips`. */
export function clusterIPElement(ip: string, comment: string): Element {
  return { kind: "element" as const, set: FIXED.clusterIPs, key: [ip], comment };
}

/** Element of `hairpin` (endpoint . endpoint). */
export function hairpinElement(ip: string): Element {
  return { kind: "element" as const, set: FIXED.hairpin, key: [ip, ip] };
}

/**
 * Keeps the classes beside every class in use ready (names.ts `classNeighbours`: one endpoint
 * fewer or more, and one endpoint): present in the draft's class counts with 0 users, so
 * {@link settleClasses} writes their set and dispatch rule. A Service scaled by one, or to one,
 * then moves to a class that is ready: a change of elements only. A ready class beside no class
 * in use any more is dropped (its set goes stale).
 */
export function readyNeighbours(d: Draft, gen: number): void {
  const want = new Set<string>();
  const idle: string[] = [];
  for (const name of d.keys("classes")) {
    if (d.get("classes", name)! === 0) idle.push(name);
    else for (const n of classNeighbours(name, gen)) want.add(n);
  }
  for (const name of idle) if (!want.has(name)) d.set("classes", name, null);
  for (const name of want) if (!d.has("classes", name)) d.set("classes", name, 0);
}

/**
 * Class chains follow their reference counts: one that gained users (or is kept ready, with
 * none: {@link readyNeighbours}) is written with its frontends set (or kept from going stale),
 * one that lost them goes stale, unless it is reserved (names.ts `reservedClasses`: a full
 * plan, `reserve`, writes those used or not; an unused one loses only its set and dispatch
 * rule, later). The dispatch chains get one rule per class chain present with its set, stale
 * ones included: a class that empties and fills again before its deletion (stale.ts) costs no
 * rule write. A partial plan puts these writes first (the head) when a class in use needs one,
 * else after the elements (`tb.later`): readiness alone never delays a change. Returns the
 * chains a full plan keeps (dispatch and reserved); a partial plan that wrote no class set or
 * chain leaves the dispatch alone.
 */
export function settleClasses(
  d: Draft,
  ctx: BuildContext,
  gen: number,
  now: number,
  tb: TxBuilder,
  reserve = false,
): string[] {
  const reserved = reserve ? reservedClasses(gen) : [];
  const names = new Set([...d.keys("classes"), ...d.base.classes.keys(), ...reserved]);
  const u = reserve || [...names].some((n) => needsWrite(d, ctx, n, gen)) ? tb.head : tb.later;
  // The dispatch rules change only with a class set or chain written now (stale.ts deletes).
  let written = reserve;
  for (const name of names) {
    const spec = () => classSpec(ctx, name, gen);
    if (!d.has("classes", name)) {
      if (isReservedClass(name, gen)) {
        // The chain stays; its set and dispatch rule go later (stale.ts), as a fresh full sync
        // would not have them.
        if (reserve) keepChain(d, spec(), u);
        const setName = classSetName(name);
        if (d.has("sets", setName)) {
          d.set("sets", setName, null);
          d.set("staleSets", setName, now);
        }
      } else if (d.has("chains", name) && !d.has("staleChains", name)) {
        // Unreferenced once this transaction commits; deleted later (stale.ts).
        d.set("staleChains", name, now);
      }
      continue;
    }
    const { set, setDigest: digest } = spec(), setName = set.name;
    if (d.has("staleSets", setName)) {
      // Still in the kernel with its dispatch rule (stale.ts has not deleted it): just kept.
      d.set("staleSets", setName, null);
      d.set("sets", setName, digest);
    } else if (d.get("sets", setName) !== digest) {
      u.set(set);
      d.set("sets", setName, digest);
      written = true;
    }
    if (keepChain(d, spec(), u)) written = true;
  }
  if (!written) return [];
  const present = [...d.keys("chains"), ...d.keys("staleChains")];
  const classes = dispatchedClasses(
    new Set(present),
    (s) => d.has("sets", s) || d.has("staleSets", s),
  );
  const dispatch = classDispatchChains(ctx, classes);
  for (const c of dispatch) ensureChain(d, c, u);
  return [...dispatch.map((c) => c.chain.name), ...reserved];
}

/** Whether class `name`, in use, needs its set or chain written before elements can use it. */
function needsWrite(d: Draft, ctx: BuildContext, name: string, gen: number): boolean {
  if ((d.get("classes", name) ?? 0) === 0) return false;
  // In use before this plan: written then.
  if ((d.base.classes.get(name) ?? 0) > 0) return false;
  const spec = classSpec(ctx, name, gen);
  if (!d.has("staleSets", spec.set.name) && d.get("sets", spec.set.name) !== spec.setDigest) {
    return true;
  }
  return d.get("chains", name) !== spec.chainDigest;
}

/** A class chain written unless it holds these rules (true when written); no longer stale. */
function keepChain(d: Draft, spec: ClassSpec, u: Unit): boolean {
  const name = spec.chain.chain.name;
  if (d.get("chains", name) === spec.chainDigest) {
    if (d.has("staleChains", name)) d.set("staleChains", name, null);
    return false;
  }
  ensureChain(d, spec.chain, u);
  return true;
}

/** A class chain's set and chain as a build context writes them, with their digests. */
interface ClassSpec {
  readonly set: Readonly<NftSet>;
  readonly setDigest: string;
  readonly chain: Readonly<ChainSpec>;
  readonly chainDigest: string;
}

/**
 * Class specs by build context, then by generation and name: settling the classes compares about
 * a hundred of them with the written state whenever a change moves a frontend between classes,
 * and building and digesting each every time cost ~80 us of such a change at 30k Services. A
 * context changes with the node or the ServiceCIDRs; the names are kinds × protocols × counts.
 */
const classSpecs = new WeakMap<BuildContext, Map<string, ClassSpec>>();

/** The spec of class chain `name` of generation `gen` under `ctx` (never modify it). */
function classSpec(ctx: BuildContext, name: string, gen: number): ClassSpec {
  let byName = classSpecs.get(ctx);
  if (byName === undefined) classSpecs.set(ctx, byName = new Map());
  const key = `${gen}:${name}`;
  let spec = byName.get(key);
  if (spec === undefined) {
    const c = parseClassChain(name);
    if (c?.gen !== gen) throw new Error(`class chain ${name} is not of generation ${gen}`);
    const set = classSet(ctx, name), chain = classChain(ctx, c.kind, c.proto, c.n, gen);
    spec = { set, setDigest: setDigest(set), chain, chainDigest: chainDigest(chain) };
    if (byName.size >= 4096) byName.clear(); // a bound for a long-lived context
    byName.set(key, spec);
  }
  return spec;
}
