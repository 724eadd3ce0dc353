/**
 * The fast repair of dispatch-map elements another program deleted, changed
 * or added: only the touched maps are listed, and each frontend's elements
 * there are put back as the written state has them, in one transaction. No
 * service is rebuilt and nothing else is read, so a flushed `service-ips` at
 * 30k Services costs its listing and its 30k adds, not a full plan. The
 * written state does not change: it is what the kernel is restored to.
 *
 * @module
 */
import { type NftablesClient, Transaction } from "../../../ffi/nftables/types.ts";
import type { Drift } from "../drift.ts";
import { elementCheck, type Touched } from "../foreign.ts";
import { decodeFrontend, diffFrontend, type FrontendElements } from "../frontend.ts";
import { FIXED } from "../names.ts";
import { elementComment } from "../service_rules.ts";
import type { WrittenState } from "../written_state.ts";
import { LISTED_MAPS } from "./kernel_view.ts";

/**
 * True when `t` touched only elements of dispatch maps (or of sets not ours
 * to compare): {@link planElementRepair} can restore it.
 */
export function elementsOnly(t: Touched): boolean {
  if (t.table || t.chains.size > 0 || t.sets.size > 0 || t.elements.size === 0) return false;
  return [...t.elements].every((s) =>
    LISTED_MAPS.some(([m]) => m === s) || elementCheck(s) === "ignore"
  );
}

/** The field of a frontend a dispatch map holds. */
function field(map: string): "verdict" | "noEndpoint" | "firewall" {
  if (map === FIXED.serviceIPs || map === FIXED.serviceNodePorts) return "verdict";
  return map === FIXED.firewallIPs ? "firewall" : "noEndpoint";
}

/**
 * Lists the touched dispatch maps and plans the transaction that restores
 * them, with the differences found (as drift.ts words them).
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
  const tx = new Transaction();
  const sink = {
    add: (e: Parameters<Transaction["add"]>[0]) => tx.add(e),
    del: (e: Parameters<Transaction["delete"]>[0]) => tx.delete(e),
  };
  const gen = written.gen ?? 0;
  for (const [map, nodePort] of LISTED_MAPS) {
    if (!t.elements.has(map)) continue;
    const f = field(map);
    const have = new Map<string, { value: string; comment?: string }>();
    for (const e of await client.listElements("map", map)) {
      have.set(e.key.join(" . "), { value: (e.value ?? []).join(" "), comment: e.comment });
    }
    for (const [key, rec] of written.frontends) {
      if (rec.nodePort !== nodePort) continue;
      const want = decodeFrontend(rec.spec);
      const h = have.get(key);
      have.delete(key);
      if (h?.value === want[f]) continue;
      if (want[f] === undefined && h === undefined) continue;
      say(
        h === undefined
          ? `element ${key} of ${map} is missing`
          : want[f] === undefined
          ? `element ${key} of ${map} is not ours`
          : `element ${key} of ${map} is "${h.value}", not "${want[f]}"`,
      );
      const was: FrontendElements = { ...want, [f]: h?.value };
      // Only this map's element differs: one comment for both sides keeps the others untouched.
      const comment = rec.owner === "" ? h?.comment ?? "" : elementComment(rec.owner);
      diffFrontend(key, nodePort, gen, was, want, { old: comment, next: comment }, sink);
    }
    // Elements nobody wrote: another program's, gone again.
    for (const [key, h] of have) {
      say(`element ${key} of ${map} is not ours`);
      const was: FrontendElements = { buckets: [], [f]: h.value };
      const c = { old: h.comment ?? "", next: h.comment ?? "" };
      diffFrontend(key, nodePort, gen, was, { buckets: [] }, c, sink);
    }
  }
  return { tx, drift };
}
