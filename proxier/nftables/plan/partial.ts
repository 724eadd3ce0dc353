/**
 * Partial sync planning: only the changed service ports are diffed against
 * what was written. Pure: written state and the changed ports' rules in, one
 * transaction and the delta to commit out. An unchanged sync plans nothing.
 *
 * Two passes: first every change updates the records, claims and counters
 * in a draft (and plans the port's own chains); then each touched frontend,
 * ClusterIP, hairpin address and class chain is compared once, final state
 * against the committed one, so a key several ports touch in one sync gets
 * at most one delete and one add.
 *
 * @module
 */
import type { BuildContext } from "../context.ts";
import { decodeFrontend, diffFrontend, encodeFrontend, renderFrontend } from "../frontend.ts";
import { parseClassChain } from "../names.ts";
import {
  builtPlan,
  claimers,
  claimRecord,
  clusterIPElement,
  ensureChain,
  hairpinElement,
  type Plan,
  readyNeighbours,
  retireChain,
  serviceRecord,
  setDigest,
  settleClasses,
} from "./common.ts";
import { elementComment, type FrontendSpec, type ServiceRules } from "../service_rules.ts";
import { TxBuilder } from "../tx_builder.ts";
import { Draft, type ServiceRecord, type WrittenState } from "../written_state.ts";

/** Inputs of {@link planPartial}. */
export interface PartialInput {
  /** This family's node, config and names. */
  ctx: BuildContext;
  /** Changed service ports: their new rules, or null when gone. */
  changes: ReadonlyMap<string, ServiceRules | null>;
  /** Rules of an unchanged port, for a frontend it takes over from a leaving claimer. */
  rulesOf: (id: string) => ServiceRules | undefined;
  /** Engine clock (ms), stamped on chains that go stale. */
  now: number;
}

function sortedInsert(ids: string[], id: string): string[] {
  if (ids.includes(id)) return ids;
  return [...ids, id].sort();
}

/** Keys the changes touched, compared once in pass 2 (a ClusterIP with its comment). */
interface Touched {
  frontends: Set<string>;
  clusterIPs: Map<string, string>;
  hairpin: Set<string>;
}

/** Plans a partial sync over `written` (which must hold a full sync's result). */
export function planPartial(written: WrittenState, input: PartialInput): Plan {
  const gen = written.gen;
  if (gen === undefined) throw new Error("planPartial: nothing written yet; run a full sync");
  const d = new Draft(written);
  const tb = new TxBuilder();
  const touched: Touched = { frontends: new Set(), clusterIPs: new Map(), hairpin: new Set() };
  const { ctx, changes, now } = input;

  // Pass 1: records, claims, counters, own chains and sets.
  for (const [id, next] of changes) {
    const old = d.get("services", id);
    if (old === undefined && next === null) continue;
    recordOwn(d, tb, old, next, now);
    recordShared(d, id, old, next, touched);
    d.set("services", id, next === null ? null : serviceRecord(next));
  }

  // Pass 2: element changes, final state against committed state.
  const rulesOf = (id: string) => {
    const r = changes.get(id);
    return r === undefined ? input.rulesOf(id) : r ?? undefined;
  };
  for (const key of touched.frontends) diffTouchedFrontend(d, key, gen, rulesOf, tb);
  for (const [ip, comment] of touched.clusterIPs) {
    const was = (written.clusterIPs.get(ip) ?? 0) > 0, is = d.has("clusterIPs", ip);
    if (was && !is) tb.tail.del(clusterIPElement(ip, comment));
    if (!was && is) tb.tail.add(clusterIPElement(ip, comment));
  }
  for (const ip of touched.hairpin) {
    const was = (written.hairpin.get(ip) ?? 0) > 0, is = d.has("hairpin", ip);
    if (was && !is) tb.tail.del(hairpinElement(ip));
    if (!was && is) tb.tail.add(hairpinElement(ip));
  }
  // No class gained or lost a user (an endpoint swapped in place, a port's other details): every
  // class is as the last sync settled it, and looking at each would cost every change O(classes).
  if (d.differs("classes")) {
    readyNeighbours(d, gen);
    settleClasses(d, ctx, gen, now, tb);
  }
  return builtPlan(tb.finish(true), d.delta);
}

/** A changed port's own chains and sets: written in its unit, or retired. */
function recordOwn(
  d: Draft,
  tb: TxBuilder,
  old: ServiceRecord | undefined,
  next: ServiceRules | null,
  now: number,
): void {
  const u = tb.unit();
  const nextChains = new Set(next?.chains.map((c) => c.chain.name) ?? []);
  for (const c of next?.chains ?? []) ensureChain(d, c, u);
  for (const name of old?.chains ?? []) {
    if (!nextChains.has(name)) retireChain(d, name, now, tb.tail);
  }
  const nextSets = new Set(next?.sets.map((s) => s.name) ?? []);
  for (const s of next?.sets ?? []) {
    const digest = setDigest(s);
    if (d.get("sets", s.name) === digest) continue;
    u.set(s);
    d.set("sets", s.name, digest);
    if (d.has("staleSets", s.name)) d.set("staleSets", s.name, null);
  }
  for (const name of old?.sets ?? []) {
    if (nextSets.has(name)) continue;
    d.set("sets", name, null);
    d.set("staleSets", name, now);
  }
}

/** A changed port's counters and frontend claims; what it touched is noted for pass 2. */
function recordShared(
  d: Draft,
  id: string,
  old: ServiceRecord | undefined,
  next: ServiceRules | null,
  touched: Touched,
): void {
  if (old?.clusterIP !== next?.clusterIP) {
    if (old?.clusterIP) {
      d.bump("clusterIPs", old.clusterIP, -1);
      touched.clusterIPs.set(old.clusterIP, touched.clusterIPs.get(old.clusterIP) ?? id);
    }
    if (next?.clusterIP) {
      d.bump("clusterIPs", next.clusterIP, 1);
      touched.clusterIPs.set(next.clusterIP, next.clusterIPComment);
    }
  }
  for (const ip of old?.hairpin ?? []) {
    if (next?.hairpin.includes(ip)) continue;
    d.bump("hairpin", ip, -1);
    touched.hairpin.add(ip);
  }
  for (const ip of next?.hairpin ?? []) {
    if (old?.hairpin.includes(ip)) continue;
    d.bump("hairpin", ip, 1);
    touched.hairpin.add(ip);
  }
  const nextKeys = new Map<string, FrontendSpec>();
  for (const f of next?.frontends ?? []) nextKeys.set(f.key, f);
  for (const key of old?.frontends ?? []) {
    if (nextKeys.has(key)) continue;
    const rec = d.get("frontends", key);
    const ids = claimers(rec).filter((x) => x !== id);
    d.set("frontends", key, ids.length === 0 ? null : claimRecord(ids, rec!.nodePort, rec!.spec));
    touched.frontends.add(key);
  }
  for (const [key, f] of nextKeys) {
    const rec = d.get("frontends", key);
    const ids = sortedInsert(claimers(rec), id);
    d.set("frontends", key, claimRecord(ids, f.nodePort, rec?.spec ?? ""));
    touched.frontends.add(key);
  }
}

/**
 * A touched frontend, final state against the committed one: its winner's
 * elements rendered, the element changes emitted, class chain counts moved.
 */
function diffTouchedFrontend(
  d: Draft,
  key: string,
  gen: number,
  rulesOf: (id: string) => ServiceRules | undefined,
  tb: TxBuilder,
): void {
  const rec = d.get("frontends", key);
  const before = d.base.frontends.get(key);
  let spec: FrontendSpec | undefined;
  if (rec !== undefined) {
    spec = rulesOf(rec.owner)?.frontends.find((f) => f.key === key);
    if (spec === undefined) throw new Error(`frontend ${key}: owner ${rec.owner} has no rules`);
  }
  // Decoded once: its buckets place the new ones, and the diff compares with it.
  const old = before === undefined ? undefined : decodeFrontend(before.spec, key);
  const next = spec && renderFrontend(spec, gen, old?.buckets);
  const nextSpec = next === undefined ? "" : encodeFrontend(next, key);
  if (rec !== undefined) d.set("frontends", key, { ...rec, spec: nextSpec });
  if ((before?.spec ?? "") === nextSpec && before?.owner === rec?.owner) return;
  const comments = {
    old: before && elementComment(before.owner),
    next: rec === undefined ? "" : elementComment(rec.owner),
  };
  const nodePort = rec?.nodePort ?? before!.nodePort;
  diffFrontend(key, nodePort, gen, old, next, comments, tb.tail);
  for (const [v, dir] of [[old?.verdict, -1], [next?.verdict, 1]] as const) {
    const name = v?.startsWith("goto ") ? v.slice(5) : undefined;
    if (name !== undefined && parseClassChain(name) !== undefined) d.bump("classes", name, dir);
  }
}
