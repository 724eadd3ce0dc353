/**
 * Fuzzed cluster states on the real kernel, inner half: runs only inside the namespace
 * tests/e2e/fuzz_kernel_test.ts makes (KNP_IN_TEST_NETNS=1), since it rewrites the
 * `kube-proxy` tables. Fixed seeds, a few steps each: short enough for CI.
 *
 * @module
 */
import { kernelFuzzOptions } from "../fuzz/kernel_tee.ts";
import { runFuzz } from "../fuzz/property.ts";

const inNetns = Deno.env.get("KNP_IN_TEST_NETNS") === "1";
if (!inNetns) console.error("SKIP kernel fuzz: run it through tests/e2e/fuzz_kernel_test.ts");

for (const seed of [1, 2, 3, 4]) {
  Deno.test({
    name: `fuzzed cluster states on the kernel (seed ${seed})`,
    ignore: !inNetns,
    async fn() {
      const k = await kernelFuzzOptions();
      try {
        const s = await runFuzz({ seed, steps: 25, packetsPerStep: 60, ...k.opts });
        const txs = k.tees[4].txs + k.tees[6].txs, ops = k.tees[4].ops + k.tees[6].ops;
        console.log(
          `fuzz-kernel seed=${seed} steps=${s.steps} transactions=${txs} operations=${ops} ` +
            `packets=${s.packets} seconds=${s.seconds.toFixed(1)}`,
        );
      } finally {
        await k.close();
      }
    },
  });
}
