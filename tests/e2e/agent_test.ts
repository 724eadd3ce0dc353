/**
 * Whole-agent e2e, outer half: builds a {@link Topology} (node, client, pods "a" and "b" with
 * echo servers) and runs tests/e2e/agent_inner.ts inside the node namespace, so the fake API
 * server, the agent and the kernel rules it programs all share that namespace. The inner run's
 * output is shown live; set KNP_AGENT_LOG=/path to also keep the agent's full log.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot } from "../netns.ts";
import { Topology } from "../topology.ts";

e2eTest("agent: whole agent in a node namespace, driven through the fake API server", async () => {
  const topo = await Topology.create({ pods: 2, tag: "ag" });
  try {
    await topo.startEcho(0, "a", 8080, 5353);
    await topo.startEcho(1, "b", 8080, 5353);
    const env = [`KNP_TOPO=${JSON.stringify(topo.names())}`];
    const log = Deno.env.get("KNP_AGENT_LOG");
    if (log) env.push(`KNP_AGENT_LOG=${log}`);
    const inner = topo.node.spawn([
      "env",
      ...env,
      denoBin,
      "test",
      "-A",
      "--no-check",
      `${repoRoot}/tests/e2e/agent_inner.ts`,
    ], { stdout: "inherit", stderr: "inherit" });
    const st = await inner.status;
    assert.equal(st.code, 0, "the inner driver failed; see its output above");
  } finally {
    await topo.close();
  }
});
