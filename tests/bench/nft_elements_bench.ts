/**
 * Benchmark: one transaction adding N elements to a verdict map
 * (`ipv4_addr . inet_proto . inet_service : verdict`, each `goto` a chain),
 * applied through the libnftables client. Prints one JSON line per size:
 * `{"bench":"nft-elements","n":N,"seconds":S}` (S covers rendering and the
 * kernel transaction, not building the Transaction object).
 *
 * With `--list`, it also times reading back a table of 10k map elements and
 * 2k chains (`list()`, `listChains()`, `listElements()`): lines with
 * `"bench":"nft-list"`.
 *
 * It refuses to run outside a named network namespace; the bench driver runs
 * it with `ip netns exec`. By hand:
 *   ip netns add b && ip netns exec b ./denow run -A tests/bench/nft_elements_bench.ts; ip netns del b
 *
 * @module
 */
import { openNftables } from "../../ffi/nftables/client.ts";
import { type NftablesClient, Transaction } from "../../ffi/nftables/types.ts";
import { assertInTestNetns } from "../e2e/fixtures/nft_guard.ts";

const TABLE = "knp-bench";
const KEY_TYPE = "ipv4_addr . inet_proto . inet_service";

/** Distinct key i: 198.18.0.0/15 addresses (up to 131072), tcp/udp, a port. */
function key(i: number): string[] {
  const a = i % 131072;
  return [
    `198.${18 + (a >> 16)}.${(a >> 8) & 255}.${a & 255}`,
    i & 1 ? "udp" : "tcp",
    String(1 + (i >> 17)),
  ];
}

function skeleton(): Transaction {
  return new Transaction()
    .add({ kind: "table" })
    .add({ kind: "chain", name: "svc" })
    .add({ kind: "map", name: "service-ips", type: KEY_TYPE, dataType: "verdict" });
}

async function dropTable(c: NftablesClient): Promise<void> {
  await c.run(new Transaction().add({ kind: "table" }).delete({ kind: "table" }));
}

/**
 * Times applying one transaction of `n` map elements, for each size, each on
 * a fresh table. Must run inside a throwaway network namespace.
 */
export async function benchNftElements(
  sizes: number[] = [1000, 10000, 100000],
): Promise<{ bench: string; n: number; seconds: number }[]> {
  await assertInTestNetns("nft_elements_bench.ts");
  const c = openNftables("ip", TABLE);
  const results: { bench: string; n: number; seconds: number }[] = [];
  try {
    for (const n of sizes) {
      await c.run(skeleton());
      const tx = new Transaction();
      for (let i = 0; i < n; i++) {
        tx.add({ kind: "element", map: "service-ips", key: key(i), value: ["goto svc"] });
      }
      const t0 = performance.now();
      await c.run(tx);
      const seconds = (performance.now() - t0) / 1000;
      const line = { bench: "nft-elements", n, seconds: Math.round(seconds * 1000) / 1000 };
      console.log(JSON.stringify(line));
      results.push(line);
      await dropTable(c);
    }
  } finally {
    c.close();
  }
  return results;
}

/**
 * Times reading back a table with `elements` map elements and `chains`
 * chains (one rule each). Must run inside a throwaway network namespace.
 */
export async function benchNftList(elements = 10000, chains = 2000): Promise<void> {
  await assertInTestNetns("nft_elements_bench.ts");
  const c = openNftables("ip", TABLE);
  try {
    const tx = skeleton();
    for (let i = 0; i < chains; i++) {
      tx.add({ kind: "chain", name: `service-${i}` });
      tx.add({
        kind: "rule",
        chain: `service-${i}`,
        rule: `ip daddr 198.19.${i >> 8}.${i & 255} goto svc`,
      });
    }
    for (let i = 0; i < elements; i++) {
      tx.add({
        kind: "element",
        map: "service-ips",
        key: key(i),
        value: [`goto service-${i % chains}`],
        comment: `ns/svc-${i}:p80`,
      });
    }
    await c.run(tx);
    const time = async (what: string, fn: () => Promise<number>) => {
      const t0 = performance.now();
      const count = await fn();
      const seconds = Math.round(performance.now() - t0) / 1000;
      console.log(JSON.stringify({ bench: "nft-list", what, elements, chains, count, seconds }));
    };
    await time("list", async () => {
      const s = await c.list();
      if (s === null) throw new Error("table vanished");
      return s.chains.size + s.maps.get("service-ips")!.elements.length;
    });
    await time("listChains", async () => (await c.listChains()).length);
    await time("listElements", async () => (await c.listElements("map", "service-ips")).length);
    await dropTable(c);
  } finally {
    c.close();
  }
}

if (import.meta.main) {
  const sizes = Deno.args.filter((a) => /^\d+$/.test(a)).map(Number);
  await benchNftElements(sizes.length > 0 ? sizes : undefined);
  if (Deno.args.includes("--list")) await benchNftList();
}
