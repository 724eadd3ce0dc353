/**
 * The longer fuzzed-cluster-state run (`deno task bench --fuzz`): many seeds, more steps, every
 * candidate packet traced at every step. With `--kernel` (inside the bench driver's network
 * namespace) every transaction also goes to the real kernel, whose tables must equal
 * MemoryNftables' after each step, and the packets are traced through the kernel's listing.
 * A failing seed is reported on stderr and the run goes on; the exit code is 1 if any failed.
 *
 * Flags: --seeds=N (default 30), --first=S (first seed, default 1000), --steps=M (default 50),
 * --packets=P (per step, 0 = all, the default), --kernel.
 *
 * @module
 */
import { type FuzzStats, runFuzz } from "../fuzz/property.ts";

function flag(name: string, def: number): number {
  const a = Deno.args.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? def : Number(a.slice(name.length + 3));
}

const kernel = Deno.args.includes("--kernel");
const seeds = flag("seeds", 30), first = flag("first", 1000), steps = flag("steps", 50);
const packetsPerStep = flag("packets", 0);
const total = { packets: 0, events: 0, full: 0, partial: 0, ops: 0, txs: 0, failures: 0 };
const coverage: Record<string, number> = {};
const t0 = performance.now();
for (let seed = first; seed < first + seeds; seed++) {
  let s: FuzzStats;
  let txs = 0;
  try {
    if (kernel) {
      const { kernelFuzzOptions } = await import("../fuzz/kernel_tee.ts");
      const k = await kernelFuzzOptions();
      try {
        s = await runFuzz({ seed, steps, packetsPerStep, ...k.opts });
        txs = k.tees[4].txs + k.tees[6].txs;
      } finally {
        await k.close();
      }
    } else {
      s = await runFuzz({ seed, steps, packetsPerStep });
    }
  } catch (e) {
    total.failures++;
    console.error(`fuzz: seed ${seed} FAILED\n${e instanceof Error ? e.message : String(e)}\n`);
    continue;
  }
  total.packets += s.packets;
  total.events += s.events;
  total.full += s.syncs.full;
  total.partial += s.syncs.partial;
  total.ops += s.syncs.ops;
  total.txs += txs;
  for (const [k, v] of Object.entries(s.coverage)) coverage[k] = (coverage[k] ?? 0) + v;
}
console.log(JSON.stringify({
  bench: kernel ? "fuzz-kernel" : "fuzz",
  seeds,
  firstSeed: first,
  steps,
  packets: total.packets,
  events: total.events,
  fullSyncs: total.full,
  partialSyncs: total.partial,
  ops: total.ops,
  ...(kernel ? { kernelTransactions: total.txs } : {}),
  failures: total.failures,
  seconds: (performance.now() - t0) / 1000,
}));
for (const [k, v] of Object.entries(coverage).sort()) {
  console.error(`fuzz: ${String(v).padStart(7)} ${k}`);
}
if (total.failures > 0) Deno.exit(1);
