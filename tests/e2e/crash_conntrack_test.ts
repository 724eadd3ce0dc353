/**
 * Crash during a conntrack reconcile, outer half: builds a {@link Topology} (node, client, pods
 * "a" and "b" with echo servers) and runs tests/e2e/crash_conntrack_inner.ts inside the node
 * namespace, where the agent, its conntrack table and the fake API server live.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot } from "../netns.ts";
import { Topology } from "../topology.ts";

e2eTest(
  "crash during a conntrack reconcile: stale UDP flows still go, healthy ones stay",
  async () => {
    const topo = await Topology.create({ pods: 2, tag: "cc" });
    try {
      await topo.startEcho(0, "a", 8080, 5353);
      await topo.startEcho(1, "b", 8080, 5353);
      const inner = topo.node.spawn([
        "env",
        `KNP_TOPO=${JSON.stringify(topo.names())}`,
        denoBin,
        "test",
        "-A",
        "--no-check",
        `${repoRoot}/tests/e2e/crash_conntrack_inner.ts`,
      ], { stdout: "inherit", stderr: "inherit" });
      const timer = setTimeout(() => inner.kill("SIGKILL"), 4 * 60_000);
      const st = await inner.status;
      clearTimeout(timer);
      assert.equal(st.code, 0, "the inner driver failed; see its output above");
    } finally {
      await topo.close();
    }
  },
);
