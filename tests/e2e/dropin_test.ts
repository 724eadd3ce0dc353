/**
 * Drop-in e2e, outer half: builds a {@link Topology} (node, client, pods "a" and "b" with echo
 * servers) and runs tests/e2e/dropin_inner.ts inside the node namespace. The inner half starts
 * the agent with upstream's own DaemonSet command lines and config files (kubeadm's, v1alpha1
 * then v1alpha2, and the kube-up addon's), checks the metrics port's upstream endpoints and the
 * start-up Event, and edits the config file under the running agent. Set KNP_AGENT_LOG=/path to
 * keep the agents' full logs.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot } from "../netns.ts";
import { Topology } from "../topology.ts";

e2eTest("drop-in: upstream's DaemonSets, config versions and endpoints", async () => {
  const topo = await Topology.create({ pods: 2, tag: "di" });
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
      `${repoRoot}/tests/e2e/dropin_inner.ts`,
    ], { stdout: "inherit", stderr: "inherit" });
    const st = await inner.status;
    assert.equal(st.code, 0, "the inner driver failed; see its output above");
  } finally {
    await topo.close();
  }
});
