/**
 * Feature gates on the real kernel: tests/e2e/gates_inner.ts in the node namespace of a two-pod
 * topology.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest(
  "feature gates: AllowServiceExternalIPs=false leaves externalIPs unprogrammed",
  async () => {
    await runInnerDriver("gat", "gates_inner.ts");
  },
);
