/**
 * What one element costs the kernel, by kind, against the size of the verdict map: why a change
 * that adds a `goto` element (a new Service, or an endpoint change that moves a frontend to
 * another class chain) is not flat in the number of Services while a bucket change is.
 *
 * At every commit that adds a jump or goto, the kernel validates the table, and validating a
 * verdict-map lookup walks every element of the map (nft_lookup_validate -> set walk). This
 * loads a table shaped like ours (a `service-ips`-like verdict map of N elements pointing at 10
 * class chains, a bucket map the class chains read) in a fresh namespace, then times seven
 * single-element transactions of each kind through the agent's raw netlink writer.
 *
 * Usage (root): ./denow run -A tests/bench/verdict_commit_bench.ts [--sizes=1000,10000,30000,60000]
 * Prints one JSON line per size: the commits' milliseconds, sorted, for a bucket element
 * (plain map) and for a verdict (`goto`) element.
 *
 * @module
 */
import { denoBin, Netns, repoRoot } from "../netns.ts";
import { openNftables } from "../../ffi/nftables/client.ts";
import { type Element, Transaction } from "../../ffi/nftables/types.ts";

/** The table: N verdict elements over 10 class chains, and the bucket map they read. */
function table(n: number): string {
  const lines = [
    "table ip vbench {",
    "  map svc { type ipv4_addr . inet_service : verdict; }",
    "  map ep { type ipv4_addr . inet_service : ipv4_addr . inet_service; }",
    "  chain pre { type nat hook prerouting priority -100; ip daddr . tcp dport vmap @svc; }",
  ];
  for (let c = 1; c <= 10; c++) {
    lines.push(`  chain c${c} { dnat ip to ip daddr . tcp dport map @ep; }`);
  }
  lines.push("}");
  const els: string[] = [];
  for (let i = 0; i < n; i++) {
    els.push(`198.${18 + (i >> 16)}.${(i >> 8) & 255}.${i & 255} . 80 : goto c${1 + i % 10}`);
  }
  if (n > 0) lines.push(`add element ip vbench svc { ${els.join(", ")} }`);
  return lines.join("\n") + "\n";
}

/** Inside the namespace: seven adds (each followed by its delete) per kind; sorted ms. */
async function inner(): Promise<void> {
  const c = openNftables("ip", "vbench");
  const time = async (e: Element) => {
    const ms: number[] = [];
    for (let k = 0; k < 7; k++) {
      const t0 = performance.now();
      await c.run(new Transaction().add(e));
      ms.push(Math.round((performance.now() - t0) * 100) / 100);
      await c.run(new Transaction().delete({ ...e, value: undefined }));
    }
    return ms.sort((a, b) => a - b);
  };
  const bucket = {
    kind: "element",
    map: "ep",
    key: ["198.19.5.1", "80"],
    value: ["198.19.6.1", "8080"],
  } as const;
  await time({ ...bucket, key: [...bucket.key], value: [...bucket.value] }); // learns the layouts
  const plain = await time({ ...bucket, key: [...bucket.key], value: [...bucket.value] });
  const verdict = await time({
    kind: "element",
    map: "svc",
    key: ["198.19.5.2", "80"],
    value: ["goto c5"],
  });
  console.log(JSON.stringify({ bucketMs: plain, gotoMs: verdict }));
  c.close();
}

async function main(): Promise<void> {
  const arg = Deno.args.find((a) => a.startsWith("--sizes="));
  const sizes = (arg?.slice(8) ?? "1000,10000,30000,60000").split(",").map(Number);
  for (const n of sizes) {
    const ns = await Netns.create("v");
    try {
      await ns.exec(["nft", "-f", "-"], { stdin: table(n) });
      const r = await ns.exec([
        denoBin,
        "run",
        "-A",
        `${repoRoot}/tests/bench/verdict_commit_bench.ts`,
        "--inner",
      ]);
      console.log(
        JSON.stringify({
          bench: "verdict-commit",
          elements: n,
          ...JSON.parse(r.stdout.trim().split("\n").at(-1)!),
        }),
      );
    } finally {
      await ns.delete();
    }
  }
}

if (import.meta.main) await (Deno.args.includes("--inner") ? inner() : main());
