/**
 * The kernel view of a targeted check: what the written state says, except
 * for the objects a foreign change touched (../foreign.ts), which are read
 * from the kernel. planFull over it repairs just those, and drift.ts compares
 * just those, without listing the dispatch maps of every Service.
 *
 * @module
 */
import type { Element, NftablesClient } from "../../../ffi/nftables/types.ts";
import { elementCheck, type Touched } from "../foreign.ts";
import { FIXED } from "../names.ts";
import { UNKNOWN, type WrittenState } from "../written_state.ts";
import { digestRules } from "./common.ts";
import { isListedSet, type KernelView, readKernelView } from "./kernel_view.ts";

/**
 * Reads the {@link KernelView} for `t`: chain names and rule counts when a
 * chain was touched, set names when a set was, and the elements of the
 * touched listed sets and maps (hairpin only when `listHairpin`). A touched
 * table is read whole (it is gone or not ours: cheap either way).
 */
export async function readTouchedView(
  client: NftablesClient,
  written: WrittenState,
  t: Touched,
  listHairpin: boolean,
): Promise<KernelView> {
  if (t.table) return await readKernelView(client, listHairpin);
  let chains = [...written.chains.keys(), ...written.staleChains.keys()];
  let ruleCounts = new Map<string, number>();
  for (const [name, digest] of written.chains) {
    if (digest !== UNKNOWN) ruleCounts.set(name, digestRules(digest));
  }
  if (t.chains.size > 0) {
    chains = await client.listChains();
    if (chains.length === 0) return await readKernelView(client, listHairpin);
    if (client.ruleCounts !== undefined) {
      const counts = await client.ruleCounts();
      ruleCounts = new Map(chains.map((c) => [c, counts.get(c) ?? 0]));
    }
  }
  let sets = [...written.sets.keys(), ...written.staleSets.keys()];
  if (t.sets.size > 0) sets = (await client.listSets()).map((s) => s.name);
  const present = new Set(sets);
  const elements = new Map<string, Element[]>();
  for (const name of new Set([...t.elements, ...t.sets])) {
    if (elementCheck(name) !== "list" || (name === FIXED.hairpin && !listHairpin)) continue;
    const kind = isListedSet(name) ? "set" : "map";
    // A deleted one is listed as empty: planFull declares it again and refills it.
    elements.set(name, present.has(name) ? await client.listElements(kind, name) : []);
  }
  return { tableExists: true, chains, sets, elements, ruleCounts, partial: true };
}
