/**
 * Which of our objects another program's nftables change touched, from the
 * kernel's change notifications (ffi/nftables/netlink/notify.ts). Pure. The
 * proxier then verifies and repairs only those (plan/touched_view.ts)
 * instead of listing the whole table every --sync-period.
 *
 * @module
 */
import type { NftNotification } from "../../ffi/nftables/netlink/notify.ts";
import type { Drift } from "./drift.ts";
import { parseEndpointsMap } from "./names.ts";
import { isListedSet, LISTED_MAPS } from "./plan/kernel_view.ts";

/** Our objects a foreign change touched, for one family's table. */
export interface Touched {
  /** The table itself was deleted or created: check everything. */
  table: boolean;
  /** Chains created, deleted, or whose rules changed (foreign chains in our table too). */
  chains: Set<string>;
  /** Sets and maps created or deleted. */
  sets: Set<string>;
  /** Sets and maps whose elements changed. */
  elements: Set<string>;
  /** The committing programs, e.g. `nft (pid 42)`, for the log. */
  by: Set<string>;
}

/** A Touched with nothing in it. */
export function emptyTouched(): Touched {
  return { table: false, chains: new Set(), sets: new Set(), elements: new Set(), by: new Set() };
}

/** `into` plus everything in `t` (`into` is changed and returned). */
export function mergeTouched(into: Touched, t: Touched): Touched {
  into.table ||= t.table;
  for (const k of ["chains", "sets", "elements", "by"] as const) {
    for (const v of t[k]) into[k].add(v);
  }
  return into;
}

/** True when nothing was touched. */
export function isEmptyTouched(t: Touched): boolean {
  return !t.table && t.chains.size === 0 && t.sets.size === 0 && t.elements.size === 0;
}

/**
 * What the foreign notifications `msgs` (one receive) did to table
 * `table` of NFPROTO family `family`, or undefined when they did not touch it.
 */
export function touchedBy(
  msgs: readonly NftNotification[],
  family: number,
  table: string,
): Touched | undefined {
  const t = emptyTouched();
  let ours = false;
  for (const m of msgs) {
    if (m.family !== family || m.table !== table) continue;
    ours = true;
    if (m.kind === "table") t.table = true;
    else if (m.kind === "chain" || m.kind === "rule") t.chains.add(m.name);
    else if (m.kind === "set") t.sets.add(m.name);
    else if (m.kind === "element") t.elements.add(m.name);
  }
  if (!ours) return undefined;
  for (const m of msgs) {
    if (m.kind === "gen" && m.proc !== undefined) t.by.add(`${m.proc} (pid ${m.pid})`);
  }
  return t;
}

/** How a set's elements are checked after a foreign change to them. */
export type ElementCheck = "list" | "regenerate" | "ignore";

/**
 * The dispatch maps and the small shared sets are listed and compared;
 * endpoint bucket maps are never listed (too big), so a change to them moves
 * every frontend to a fresh generation; other sets (ClientIP affinity, filled
 * by the packet path) and foreign ones are not ours to compare.
 */
export function elementCheck(set: string): ElementCheck {
  if (LISTED_MAPS.some(([m]) => m === set) || isListedSet(set)) return "list";
  return parseEndpointsMap(set) !== undefined ? "regenerate" : "ignore";
}

/** The endpoint bucket maps of generation `gen` that `t` touched (elements or the maps). */
export function touchedBuckets(t: Touched, gen: number): string[] {
  return [...new Set([...t.elements, ...t.sets])].filter((s) => parseEndpointsMap(s)?.gen === gen);
}

/** `drift` plus one difference per bucket map another program changed. */
export function withBuckets(
  drift: Drift | undefined,
  buckets: readonly string[],
  keep = 5,
): Drift | undefined {
  if (buckets.length === 0) return drift;
  const out = drift ?? { count: 0, examples: [] };
  return {
    count: out.count + buckets.length,
    examples: [...out.examples, ...buckets.map((m) => `elements of ${m} changed`)].slice(0, keep),
  };
}
