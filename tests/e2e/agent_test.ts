/**
 * Whole-agent e2e, outer half: builds a {@link Topology} (node, client, pods "a" and "b" with
 * echo servers) and runs tests/e2e/agent_inner.ts inside the node namespace, so the fake API
 * server, the agent and the kernel rules it programs all share that namespace. The inner run's
 * output is shown live; set KNP_AGENT_LOG=/path to also keep the agent's full log.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest("agent: whole agent in a node namespace, driven through the fake API server", async () => {
  await runInnerDriver("ag", "agent_inner.ts", ["KNP_AGENT_LOG"]);
});
