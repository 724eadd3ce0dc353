/**
 * The cheap look at the kernel a full sync plans against (plan/full.ts) and
 * checks for drift (drift.ts): chain and set names, rule counts when the
 * client can count them, and the elements of the dispatch maps, the class
 * chains' frontends sets and the small shared sets. Endpoint bucket maps are never listed: that costs seconds at
 * scale.
 *
 * @module
 */
import type { Element, NftablesClient } from "../../../ffi/nftables/types.ts";
import { classOfSet, FIXED } from "../names.ts";

/** What a cheap look at the kernel found. */
export interface KernelView {
  /** Whether our table is there at all. */
  tableExists: boolean;
  /** Every chain of the table. */
  chains: readonly string[];
  /** Every set and map of the table, by name. */
  sets: readonly string[];
  /** Elements of the listed sets and maps, by name (a missing name was not listed). */
  elements: ReadonlyMap<string, readonly Element[]>;
  /** Rules per chain, when the listing had them: a count unlike ours means a foreign rule. */
  ruleCounts?: ReadonlyMap<string, number>;
  /**
   * A targeted check's view (touched_view.ts): the dispatch maps not in
   * `elements` hold what the written state says, rather than nothing.
   */
  partial?: boolean;
}

/** The maps a full sync lists, and whether they hold NodePort frontends. */
export const LISTED_MAPS: readonly [string, boolean][] = [
  [FIXED.serviceIPs, false],
  [FIXED.serviceNodePorts, true],
  [FIXED.noEndpointServices, false],
  [FIXED.noEndpointNodePorts, true],
  [FIXED.firewallIPs, false],
];

/** Sets a full sync lists (hairpin only while small: see {@link readKernelView}). */
export const LISTED_SETS: readonly string[] = [FIXED.clusterIPs, FIXED.nodePortIPs, FIXED.hairpin];

/** True for a set a full sync lists: a fixed one of {@link LISTED_SETS} or a class's frontends. */
export function isListedSet(name: string): boolean {
  return LISTED_SETS.includes(name) || classOfSet(name) !== undefined;
}

/**
 * Reads the {@link KernelView} of the client's table. The hairpin set holds
 * one element per local endpoint: it is listed only when `listHairpin`.
 */
export async function readKernelView(
  client: NftablesClient,
  listHairpin: boolean,
): Promise<KernelView> {
  const elements = new Map<string, Element[]>();
  const chains = await client.listChains();
  const view: KernelView = { tableExists: chains.length > 0, chains, sets: [], elements };
  if (!view.tableExists) return view;
  if (client.ruleCounts !== undefined) {
    // Every chain gets a count: a flushed chain is a difference too.
    const counts = await client.ruleCounts();
    view.ruleCounts = new Map(chains.map((c) => [c, counts.get(c) ?? 0]));
  }
  const sets = await client.listSets();
  view.sets = sets.map((s) => s.name);
  for (const s of sets) {
    const listed = s.kind === "map" ? LISTED_MAPS.some(([m]) => m === s.name) : isListedSet(s.name);
    if (!listed || (s.name === FIXED.hairpin && !listHairpin)) continue;
    elements.set(s.name, await client.listElements(s.kind, s.name));
  }
  return view;
}
