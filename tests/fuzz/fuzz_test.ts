/**
 * Fuzzed cluster states (issue 11): random valid clusters and change sequences through the
 * agent's pipeline into MemoryNftables; after every step the packet tracer agrees with the
 * independent reference model and partial syncs equal a cold start. Fixed seeds; the longer run
 * is `deno task bench --fuzz`.
 */
import { runFuzz } from "./property.ts";

for (const seed of [1, 2, 3]) {
  Deno.test(`fuzzed cluster states: tracer equals the reference model (seed ${seed})`, async () => {
    const s = await runFuzz({ seed, steps: 30, packetsPerStep: 80 });
    console.log(JSON.stringify(s));
  });
}
