/**
 * Turns a built ruleset into one complete transaction: add the table, flush
 * it, re-create the base chains, then add every chain, set, rule and element. Used by tests, the dry
 * run and as the cold-start fallback of the sync engine.
 *
 * @module
 */
import { type Element, Transaction } from "../ffi/nftables/types.ts";
import type { BuiltRuleset, ElementSpec, Fragment } from "./fragment.ts";
import { TABLE_COMMENT } from "./names.ts";

/** Fragments in a stable order: the base first, then services sorted by id. */
export function orderedFragments(built: BuiltRuleset): Fragment[] {
  const ids = [...built.services.keys()].sort();
  return [built.base, ...ids.map((id) => built.services.get(id)!)];
}

/**
 * Converts an element spec to an nftables element, given which names are
 * maps (everything else is a set). Throws when the target is unknown.
 */
export function toElement(e: ElementSpec, kinds: ReadonlyMap<string, "set" | "map">): Element {
  const kind = kinds.get(e.target);
  if (kind === undefined) throw new Error(`element targets unknown set or map "${e.target}"`);
  const out: Element = kind === "map"
    ? { kind: "element", map: e.target, key: e.key }
    : { kind: "element", set: e.target, key: e.key };
  if (e.value !== undefined) out.value = e.value;
  if (e.comment !== undefined) out.comment = e.comment;
  return out;
}

/**
 * A full transaction for the ruleset. Objects come in dependency order:
 * chains and sets before the rules that reference them, rules before
 * elements whose verdicts jump to chains.
 */
export function assemble(built: BuiltRuleset): Transaction {
  const frags = orderedFragments(built);
  const tx = new Transaction();
  tx.add({ kind: "table", comment: TABLE_COMMENT });
  tx.flush({ kind: "table" });
  // Re-create base chains: an existing one with another priority or type (a
  // table left by kube-proxy 1.31-1.33, say) would make "add chain" fail.
  // The flush above emptied them, so deleting is allowed.
  for (const c of built.base.chains) {
    if (c.chain.hook === undefined) continue;
    tx.add({ kind: "chain", name: c.chain.name });
    tx.delete({ kind: "chain", name: c.chain.name });
  }
  const kinds = new Map<string, "set" | "map">();
  for (const f of frags) for (const c of f.chains) tx.add(c.chain);
  for (const f of frags) {
    for (const s of f.sets) {
      kinds.set(s.name, s.kind);
      tx.add(s);
    }
  }
  for (const f of frags) {
    for (const c of f.chains) {
      for (const rule of c.rules) tx.add({ kind: "rule", chain: c.chain.name, rule });
    }
  }
  // Group elements by target so the script renderer folds them into one command each.
  const byTarget = new Map<string, ElementSpec[]>();
  for (const f of frags) {
    for (const e of f.elements) {
      let l = byTarget.get(e.target);
      if (!l) byTarget.set(e.target, l = []);
      l.push(e);
    }
  }
  for (const [, list] of byTarget) {
    // Two service ports may own the same element (shared ClusterIP, shared endpoint).
    const seen = new Set<string>();
    for (const e of list) {
      const k = e.key.join(" . ");
      if (seen.has(k)) continue;
      seen.add(k);
      tx.add(toElement(e, kinds));
    }
  }
  return tx;
}
