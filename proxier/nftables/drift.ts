/**
 * What another program changed: the differences between the table as this
 * proxier last wrote it (the written state) and the cheap view of the kernel
 * a full sync reads. Pure. Changes the proxier is about to make are not
 * drift: only kernel versus written counts, so the engine can tell a repair
 * from an ordinary sync, and say what was repaired.
 *
 * Covered: chains missing, foreign chains, chains whose rule count differs
 * (a rule added to or removed from one of ours), sets and maps missing or
 * foreign, and the elements of the listed maps and sets (dispatch maps, the
 * class chains' frontends sets, cluster-ips, hairpin while it is listed). Not covered: endpoint bucket maps
 * (never listed, see plan/kernel_view.ts) and a rule replaced by one of the same count.
 *
 * @module
 */
import { decodeFrontend, frontendPlaces } from "./frontend.ts";
import { classOfSet, FIXED } from "./names.ts";
import { digestRules } from "./plan/common.ts";
import { type KernelView, LISTED_MAPS } from "./plan/kernel_view.ts";
import { UNKNOWN, type WrittenState } from "./written_state.ts";

/** The differences found, and a few of them in words. */
export interface Drift {
  /** How many differences were found. */
  count: number;
  /** The first differences, e.g. `chain services holds 3 rules, not 2`. */
  examples: string[];
}

/** The differences between `written` and the kernel `view` (at most `keep` described). */
export function kernelDrift(written: WrittenState, view: KernelView, keep = 5): Drift {
  const out: Drift = { count: 0, examples: [] };
  const say = (what: string) => {
    if (out.count++ < keep) out.examples.push(what);
  };
  if (!view.tableExists) {
    say("the table is gone");
    return out;
  }
  const chains = new Set(view.chains);
  for (const [name, digest] of written.chains) {
    if (!chains.has(name)) say(`chain ${name} is missing`);
    else if (digest !== UNKNOWN && view.ruleCounts?.has(name)) {
      const have = view.ruleCounts.get(name)!, want = digestRules(digest);
      if (have !== want) say(`chain ${name} holds ${have} rules, not ${want}`);
    }
  }
  for (const name of view.chains) {
    if (!written.chains.has(name) && !written.staleChains.has(name)) {
      say(`chain ${name} is not ours`);
    }
  }
  const sets = new Set(view.sets);
  for (const name of written.sets.keys()) if (!sets.has(name)) say(`set ${name} is missing`);
  for (const name of view.sets) {
    if (!written.sets.has(name) && !written.staleSets.has(name)) say(`set ${name} is not ours`);
  }

  // The listed dispatch maps and class sets: element value by key, as written and as found.
  const want = new Map<string, Map<string, string>>();
  for (const [key, rec] of written.frontends) {
    for (const [place, v] of frontendPlaces(rec.nodePort, decodeFrontend(rec.spec))) {
      let m = want.get(place);
      if (m === undefined) want.set(place, m = new Map());
      m.set(key, v);
    }
  }
  for (const [place, listed] of view.elements) {
    if (!LISTED_MAPS.some(([m]) => m === place) && classOfSet(place) === undefined) continue;
    const wanted = want.get(place) ?? new Map<string, string>();
    const have = new Map(listed.map((e) => [e.key.join(" . "), (e.value ?? []).join(" ")]));
    for (const [key, v] of wanted) {
      const h = have.get(key);
      if (h === undefined) say(`element ${key} of ${place} is missing`);
      else if (h !== v) say(`element ${key} of ${place} is "${h}", not "${v}"`);
    }
    for (const key of have.keys()) {
      if (!wanted.has(key)) say(`element ${key} of ${place} is not ours`);
    }
  }
  for (
    const [set, counts] of [[FIXED.clusterIPs, written.clusterIPs], [
      FIXED.hairpin,
      written.hairpin,
    ]]
  ) {
    const listed = view.elements.get(set as string);
    if (listed === undefined) continue;
    const have = new Set(listed.map((e) => e.key[0]));
    for (const ip of (counts as Map<string, number>).keys()) {
      if (!have.has(ip)) say(`element ${ip} of ${set} is missing`);
    }
    for (const ip of have) {
      if (!(counts as Map<string, number>).has(ip)) say(`element ${ip} of ${set} is not ours`);
    }
  }
  return out;
}
