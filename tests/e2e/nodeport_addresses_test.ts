/**
 * nodePortAddresses keywords and interface addresses on the real kernel:
 * tests/e2e/nodeport_addresses_inner.ts in the node namespace of a two-pod topology.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest("nodePortAddresses: keywords, CIDRs over interface addresses, live changes", async () => {
  await runInnerDriver("npa", "nodeport_addresses_inner.ts");
});
