/**
 * Node lifecycle on the real kernel: tests/e2e/lifecycle_inner.ts in the node namespace of a
 * two-pod topology (issue 20 §4: exit on a Node IP change or deletion, rules left in place).
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest("lifecycle: the agent exits 1 when its Node's IPs change or it is deleted", async () => {
  await runInnerDriver("lfc", "lifecycle_inner.ts");
});
