/**
 * The rule builder's output, in pieces the sync engine can diff cheaply.
 *
 * The builder produces one {@link Fragment} for the static skeleton (base
 * chains, dispatch chains, set and map declarations) and one per service
 * port. The sync engine keeps the fragments it last wrote and, on a partial
 * sync, rebuilds and diffs only the fragments of changed services.
 *
 * @module
 */
import type { Chain, Map as NftMap, Set as NftSet } from "../ffi/nftables/types.ts";

/** A chain with its complete rule list (nft syntax bodies, comments included). */
export interface ChainSpec {
  chain: Chain;
  rules: string[];
}

/**
 * An element owned by a fragment. Several fragments may own the same element
 * (two ports of one Service share a ClusterIP in `cluster-ips`): the sync
 * engine reference-counts by `target` + rendered key.
 */
export interface ElementSpec {
  /** Set or map name. */
  target: string;
  key: string[];
  value?: string[];
  comment?: string;
}

/** Everything one builder unit contributes to the table. */
export interface Fragment {
  chains: ChainSpec[];
  /** Named sets and maps this fragment owns (e.g. affinity sets). */
  sets: (NftSet | NftMap)[];
  elements: ElementSpec[];
}

/** A whole family's ruleset, as built. */
export interface BuiltRuleset {
  family: "ip" | "ip6";
  table: string;
  base: Fragment;
  /** By ServicePortInfo.id. */
  services: Map<string, Fragment>;
}

/** Stable identity of an element: target plus rendered key. */
export function elementId(e: ElementSpec): string {
  return `${e.target}\u0000${e.key.join(" . ")}`;
}
