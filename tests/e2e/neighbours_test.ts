/**
 * Hostile neighbours, outer half: builds a {@link Topology} (node, client, pods "a" and "b" with
 * echo servers) and runs tests/e2e/neighbours_inner.ts inside the node namespace, where other
 * programs' nftables tables, the fake API server and the agent all share the kernel.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest("neighbours: other programs' nftables objects never break the agent's syncs", async () => {
  await runInnerDriver("nb", "neighbours_inner.ts", ["KNP_NFT_MONITOR"]);
});
