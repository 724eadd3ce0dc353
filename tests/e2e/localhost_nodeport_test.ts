/**
 * Localhost NodePorts (KEP-6032) on the real kernel: tests/e2e/localhost_nodeport_inner.ts in
 * the node namespace of a two-pod topology, with real connections to 127.0.0.1 and ::1.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest("localhost NodePorts: the userspace proxy on 127.0.0.1 and ::1", async () => {
  await runInnerDriver("lhnp", "localhost_nodeport_inner.ts");
});
