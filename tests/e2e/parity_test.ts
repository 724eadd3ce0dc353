/**
 * Upstream parity on the real kernel: tests/e2e/parity_inner.ts in the node namespace of a
 * two-pod topology.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest("parity: behaviours as upstream kube-proxy's code has them", async () => {
  await runInnerDriver("par", "parity_inner.ts");
});
