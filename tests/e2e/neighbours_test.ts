/**
 * Hostile neighbours, outer half: builds a {@link Topology} (node, client, pods "a" and "b" with
 * echo servers) and runs tests/e2e/neighbours_inner.ts inside the node namespace, where other
 * programs' nftables tables, the fake API server and the agent all share the kernel.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot } from "../netns.ts";
import { Topology } from "../topology.ts";

e2eTest("neighbours: other programs' nftables objects never break the agent's syncs", async () => {
  const topo = await Topology.create({ pods: 2, tag: "nb" });
  try {
    await topo.startEcho(0, "a", 8080, 5353);
    await topo.startEcho(1, "b", 8080, 5353);
    const env = [`KNP_TOPO=${JSON.stringify(topo.names())}`];
    const monitor = Deno.env.get("KNP_NFT_MONITOR");
    if (monitor) env.push(`KNP_NFT_MONITOR=${monitor}`);
    const inner = topo.node.spawn([
      "env",
      ...env,
      denoBin,
      "test",
      "-A",
      "--no-check",
      `${repoRoot}/tests/e2e/neighbours_inner.ts`,
    ], { stdout: "inherit", stderr: "inherit" });
    const st = await inner.status;
    assert.equal(st.code, 0, "the inner driver failed; see its output above");
  } finally {
    await topo.close();
  }
});
