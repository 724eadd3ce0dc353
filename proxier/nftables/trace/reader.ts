/**
 * Read-only access to a ruleset for the packet tracer: from a
 * {@link TableState} (what MemoryNftables holds, or a dry run), or from the
 * live kernel through an {@link NftablesClient}, fetching only the chains and
 * elements a packet meets (`list chain`, `get element`) so tracing stays
 * cheap on a node with 300k elements.
 *
 * @module
 */
import type {
  Chain,
  Element,
  NftablesClient,
  Rule,
  TableState,
} from "../../../ffi/nftables/types.ts";
import { canonicalIP } from "../../../net/ip.ts";

/** What the tracer reads. Nothing here changes the ruleset. */
export interface RulesetReader {
  /** `ip` or `ip6`. */
  readonly family: string;
  /** Base chains (with hook and priority). */
  baseChains(): Promise<Chain[]>;
  /** A chain's rules, or undefined when the chain does not exist. */
  rules(chain: string): Promise<Rule[] | undefined>;
  /**
   * The element of set or map `name` whose key is `key` (one part per field,
   * in nft text), undefined when there is none; throws when the set does not
   * exist.
   */
  element(name: string, key: string[]): Promise<Element | undefined>;
  /** Every element of a set or map ([] when it does not exist). For the dispatch maps only. */
  elements(name: string): Promise<Element[]>;
}

const canon = (s: string) => canonicalIP(s) ?? s;

/** A reader over a table held in memory. */
export function tableReader(state: TableState): RulesetReader {
  const index = new Map<string, Map<string, Element>>();
  const elementsOf = (name: string) => {
    let m = index.get(name);
    if (m !== undefined) return m;
    const els = state.sets.get(name)?.elements ?? state.maps.get(name)?.elements;
    if (els === undefined) throw new Error(`reference to missing set or map @${name}`);
    m = new Map(els.map((e) => [e.key.flatMap((k) => k.split(" . ")).map(canon).join(" . "), e]));
    index.set(name, m);
    return m;
  };
  return {
    family: state.family,
    baseChains: () =>
      Promise.resolve([...state.chains.values()].filter((c) => c.chain.hook).map((c) => c.chain)),
    rules: (chain) => Promise.resolve(state.chains.get(chain)?.rules),
    element: (name, key) => Promise.resolve(elementsOf(name).get(key.map(canon).join(" . "))),
    elements: (name) =>
      Promise.resolve(state.sets.get(name)?.elements ?? state.maps.get(name)?.elements ?? []),
  };
}

/** A reader over the live table behind `client` (read-only: list and get only). */
export function clientReader(client: NftablesClient): RulesetReader {
  const chains = new Map<string, Promise<{ chain: Chain; rules: Rule[] } | null>>();
  // Every chain in one listing where the client can: libnftables loads the table's elements
  // before any chain listing, so one chain at a time costs that load per chain.
  const all = client.listRules?.();
  const chain = (name: string) => {
    let c = chains.get(name);
    if (c === undefined) {
      c = all ? all.then((m) => m.get(name) ?? null) : client.listChain(name);
      chains.set(name, c);
    }
    return c;
  };
  const kinds = new Map<string, "set" | "map">();
  let sets: Promise<void> | undefined;
  const kindOf = async (name: string) => {
    sets ??= client.listSets().then((l) => l.forEach((s) => kinds.set(s.name, s.kind)));
    await sets;
    const k = kinds.get(name);
    if (k === undefined) throw new Error(`reference to missing set or map @${name}`);
    return k;
  };
  return {
    family: client.family,
    async baseChains() {
      const all = await Promise.all((await client.listChains()).map(chain));
      return all.filter((c) => c !== null && c.chain.hook !== undefined).map((c) => c!.chain);
    },
    async rules(name) {
      return (await chain(name))?.rules;
    },
    async element(name, key) {
      return (await client.getElement(await kindOf(name), name, key)) ?? undefined;
    },
    async elements(name) {
      try {
        return await client.listElements(await kindOf(name), name);
      } catch {
        return [];
      }
    },
  };
}
