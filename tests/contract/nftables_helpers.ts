/**
 * The helpers of the nftables contract suite (nftables_cases.ts and
 * nftables_rejections.ts): the case type, the failure check with its
 * atomicity test, the table digest and object builders.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  type Chain,
  type Element,
  type Family,
  type NftablesClient,
  NftablesError,
  type TableState,
  Transaction,
} from "../../ffi/nftables/types.ts";

/** Returns a client for the case's table (the same table on every call within a case). */
export type ClientFactory = (family?: Family) => NftablesClient;

/** One contract case. */
export interface ContractCase {
  name: string;
  run: (c: ClientFactory) => Promise<void>;
}

/** Which errno a failure must carry. */
export type Want = "notFound" | "exists" | "busy" | "notSupported" | "any";

const WANT_RE: Record<Exclude<Want, "any">, RegExp> = {
  notFound: /No such file or directory|does not exist/i,
  exists: /File exists/i,
  busy: /Device or resource busy/i,
  notSupported: /Operation not supported/i,
};

/**
 * Runs `tx` expecting failure at op `index` with the given kind, and checks
 * that the table is exactly as before (atomicity).
 */
export async function fails(
  c: NftablesClient,
  tx: Transaction,
  index: number,
  want: Want,
): Promise<void> {
  const before = summarize(await c.list());
  let err: unknown;
  try {
    await c.run(tx);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof NftablesError, `expected NftablesError, got ${String(err)}`);
  if (want !== "any") {
    assert.match(err.message, WANT_RE[want], `wrong error kind (${want}): ${err.message}`);
  }
  assert.equal(err.failedOperation, index, `wrong failedOperation for: ${err.message}`);
  assert.ok(err.failedCommand !== undefined && err.failedCommand.length > 0);
  assert.deepEqual(summarize(await c.list()), before, "a failed transaction changed the table");
}

/** A comparable, order-independent digest of a table. */
export function summarize(st: TableState | null): unknown {
  if (st === null) return null;
  const byName = <T>(m: globalThis.Map<string, T>) => [...m.keys()].sort();
  const elems = (es: Element[]) =>
    es.map((e) =>
      `${e.key.join(" . ")}${e.value ? ` : ${e.value.join(" . ")}` : ""}${
        e.comment === undefined ? "" : ` #${e.comment}`
      }`
    ).sort();
  return {
    comment: st.comment ?? null,
    chains: byName(st.chains).map((n) => {
      const { chain, rules } = st.chains.get(n)!;
      return {
        name: n,
        base: baseOf(chain),
        rules: rules.map((r) => ({ handle: r.handle, comment: r.comment ?? null })),
      };
    }),
    sets: byName(st.sets).map((n) => {
      const { set, elements } = st.sets.get(n)!;
      return { name: n, type: norm(set.type), flags: flags(set.flags), elements: elems(elements) };
    }),
    maps: byName(st.maps).map((n) => {
      const { map, elements } = st.maps.get(n)!;
      return {
        name: n,
        type: `${norm(map.type)} : ${norm(map.dataType)}`,
        flags: flags(map.flags),
        elements: elems(elements),
      };
    }),
  };
}

function baseOf(c: Chain): string | null {
  return c.hook === undefined
    ? null
    : `${c.type} ${c.hook} ${c.priority ?? 0} ${c.policy ?? "accept"}`;
}

/** A set type with its parts joined by " . ". */
export function norm(t: string): string {
  return t.split(".").map((p) => p.trim()).join(" . ");
}

/** Set flags as a sorted, comma-separated list. */
export function flags(f: string[] | undefined): string {
  return [...new Set(f ?? [])].sort().join(",");
}

export async function mustList(c: NftablesClient): Promise<TableState> {
  const st = await c.list();
  assert.ok(st !== null, "table should exist");
  return st;
}

/** The rules of one chain, which must exist. */
export function rulesOf(st: TableState, chain: string) {
  const c = st.chains.get(chain);
  assert.ok(c !== undefined, `chain ${chain} should exist`);
  return c.rules;
}

/** Element keys (and values) as text, sorted. */
export function keys(es: Element[]): string[] {
  return es.map((e) => `${e.key.join(" . ")}${e.value ? ` : ${e.value.join(" . ")}` : ""}`)
    .sort();
}

/** A new transaction. */
export const tx = () => new Transaction();
/** The case's table. */
export const table = { kind: "table" } as const;
/** A chain object. */
export const chain = (name: string, extra: Partial<Chain> = {}): Chain => ({
  kind: "chain",
  name,
  ...extra,
});
/** A rule object. */
export const rule = (
  c: string,
  body: string,
  extra: { comment?: string; handle?: number } = {},
) => ({
  kind: "rule" as const,
  chain: c,
  rule: body,
  ...extra,
});
/** A nat prerouting base chain's type, hook and priority. */
export const natPre = { type: "nat", hook: "prerouting", priority: -100 } as const;
/** A set element (no value) or map element (with one). */
export const el = (set: string, key: string[], value?: string[], comment?: string): Element => ({
  kind: "element",
  ...(value === undefined ? { set } : { map: set }),
  key,
  ...(value === undefined ? {} : { value }),
  ...(comment === undefined ? {} : { comment }),
});
