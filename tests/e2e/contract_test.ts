/**
 * Real-kernel run of the nftables contract suite: starts
 * tests/contract/real_contract_test.ts inside a fresh network namespace with
 * KNP_IN_TEST_NETNS=1, so the same cases that MemoryNftables passes
 * (ffi/nftables/memory/contract_test.ts) are checked against the kernel, and the raw
 * netlink element path against libnftables (tests/contract/raw_elements_test.ts), and
 * listings against hash set resizes (tests/contract/torn_listing_test.ts), and the
 * monitor's filter of our own batches (tests/contract/monitor_filter_test.ts).
 *
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot, withNetns } from "../netns.ts";

e2eTest("nftables contract suite passes against the kernel", async () => {
  await withNetns(1, async (ns) => {
    const res = await ns.exec(
      [
        "env",
        "KNP_IN_TEST_NETNS=1",
        "NO_COLOR=1",
        denoBin,
        "test",
        "-A",
        `${repoRoot}/tests/contract/real_contract_test.ts`,
        `${repoRoot}/tests/contract/raw_elements_test.ts`,
        `${repoRoot}/tests/contract/torn_listing_test.ts`,
        `${repoRoot}/tests/contract/monitor_filter_test.ts`,
      ],
      { check: false },
    );
    const out = `${res.stdout}\n${res.stderr}`;
    if (res.code !== 0) console.error(out);
    assert.equal(res.code, 0, "contract suite failed against the kernel (output above)");
    const m = /ok \| (\d+) passed \| 0 failed/.exec(out);
    assert.ok(m !== null && Number(m[1]) > 0, `no contract case ran:\n${out}`);
    assert.doesNotMatch(out, /ignored/i, "contract cases were skipped inside the namespace");
  });
});
