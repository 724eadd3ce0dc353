/**
 * Drop-in e2e, outer half: builds a {@link Topology} (node, client, pods "a" and "b" with echo
 * servers) and runs tests/e2e/dropin_inner.ts inside the node namespace. The inner half starts
 * the agent with upstream's own DaemonSet command lines and config files (kubeadm's, v1alpha1
 * then v1alpha2, and the kube-up addon's), checks the metrics port's upstream endpoints and the
 * start-up Event, and edits the config file under the running agent. Set KNP_AGENT_LOG=/path to
 * keep the agents' full logs.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest("drop-in: upstream's DaemonSets, config versions and endpoints", async () => {
  await runInnerDriver("di", "dropin_inner.ts", ["KNP_AGENT_LOG"]);
});
