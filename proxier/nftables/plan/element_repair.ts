/**
 * The fast repair of dispatch-map and class-set elements another program
 * deleted, changed or added: only the touched maps and sets are listed, and each frontend's elements
 * there are put back as the written state has them, in one transaction. No
 * service is rebuilt and nothing else is read, so a flushed class set at
 * 30k Services costs its listing and its 30k adds, not a full plan. The
 * written state does not change: it is what the kernel is restored to.
 *
 * @module
 */
import { type NftablesClient, Transaction } from "../../../ffi/nftables/types.ts";
import type { Drift } from "../drift.ts";
import { elementCheck, type Touched } from "../foreign.ts";
import { decodeFrontend, frontendPlaces, placeElement } from "../frontend.ts";
import { classOfSet } from "../names.ts";
import { elementComment } from "../service_rules.ts";
import type { WrittenState } from "../written_state.ts";
import { LISTED_MAPS } from "./kernel_view.ts";

/** A dispatch map or a class chain's frontends set: where frontends' dispatch elements are. */
function isPlace(name: string): boolean {
  return LISTED_MAPS.some(([m]) => m === name) || classOfSet(name) !== undefined;
}

/**
 * True when `t` touched only elements of dispatch maps and class sets (or of
 * sets not ours to compare): {@link planElementRepair} can restore it.
 */
export function elementsOnly(t: Touched): boolean {
  if (t.table || t.chains.size > 0 || t.sets.size > 0 || t.elements.size === 0) return false;
  return [...t.elements].every((s) => isPlace(s) || elementCheck(s) === "ignore");
}

/**
 * Lists the touched dispatch maps and class sets and plans the transaction
 * that restores them, with the differences found (as drift.ts words them).
 */
export async function planElementRepair(
  client: NftablesClient,
  written: WrittenState,
  t: Touched,
  keep = 5,
): Promise<{ tx: Transaction; drift: Drift }> {
  const drift: Drift = { count: 0, examples: [] };
  const say = (what: string) => {
    if (drift.count++ < keep) drift.examples.push(what);
  };
  const places = [...t.elements].filter(isPlace);
  if (places.length === 0) return { tx: new Transaction(), drift };
  // What each touched place should hold, from the written state.
  const want = new Map<string, Map<string, { value: string; comment: string }>>();
  for (const p of places) want.set(p, new Map());
  for (const [key, rec] of written.frontends) {
    for (const [place, value] of frontendPlaces(rec.nodePort, decodeFrontend(rec.spec))) {
      want.get(place)?.set(key, {
        value,
        comment: rec.owner === "" ? "" : elementComment(rec.owner),
      });
    }
  }
  const tx = new Transaction();
  for (const place of places) {
    const kind = classOfSet(place) === undefined ? "map" : "set";
    const wanted = want.get(place)!;
    const replaced = new Set<string>();
    for (const e of await client.listElements(kind, place)) {
      const key = e.key.join(" . "), value = (e.value ?? []).join(" ");
      const w = wanted.get(key);
      if (w !== undefined && w.value === value) {
        wanted.delete(key);
        continue;
      }
      say(
        w === undefined
          ? `element ${key} of ${place} is not ours`
          : `element ${key} of ${place} is "${value}", not "${w.value}"`,
      );
      const { value: _v, comment: _c, ...del } = placeElement(place, key, value);
      tx.delete(del);
      if (w !== undefined) replaced.add(key);
    }
    // What is left is missing (or was just deleted for its value): put back as written.
    for (const [key, w] of wanted) {
      if (!replaced.has(key)) say(`element ${key} of ${place} is missing`);
      tx.add(placeElement(place, key, w.value, w.comment === "" ? undefined : w.comment));
    }
  }
  return { tx, drift };
}
