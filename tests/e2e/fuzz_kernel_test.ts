/**
 * Fuzzed cluster states on the real kernel, outer half: runs tests/e2e/fuzz_kernel_inner.ts
 * inside a fresh network namespace (KNP_IN_TEST_NETNS=1). There every transaction the fuzzer's
 * agent builds is applied to the kernel and to MemoryNftables; the kernel must accept each one,
 * its listed tables must equal the fake's after every step, and packets traced through the
 * kernel's listing must match the reference model.
 *
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot, withNetns } from "../netns.ts";

e2eTest(
  "fuzzed cluster states: the kernel accepts every transaction and lists what the fake holds",
  async () => {
    await withNetns(1, async (ns) => {
      const res = await ns.exec(
        [
          "env",
          "KNP_IN_TEST_NETNS=1",
          "NO_COLOR=1",
          denoBin,
          "test",
          "-A",
          `${repoRoot}/tests/e2e/fuzz_kernel_inner.ts`,
        ],
        { check: false },
      );
      const out = `${res.stdout}\n${res.stderr}`;
      if (res.code !== 0) console.error(out);
      assert.equal(res.code, 0, "the kernel fuzz run failed (output above)");
      assert.match(out, /ok \| [1-9]\d* passed \| 0 failed/, `no fuzz case ran:\n${out}`);
      assert.doesNotMatch(out, /ignored/i, "fuzz cases were skipped inside the namespace");
      for (const l of out.split("\n")) if (l.startsWith("fuzz-kernel ")) console.log(l);
    });
  },
);
