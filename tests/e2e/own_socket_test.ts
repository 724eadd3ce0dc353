/**
 * Our own nftables sockets at high descriptors, outer half: builds a {@link Topology} (node,
 * client, pods "a" and "b" with echo servers) and runs tests/e2e/own_socket_inner.ts inside the
 * node namespace, where the agent starts with thousands of descriptors already open.
 * @module
 */
import { e2eTest } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

e2eTest(
  "own socket: our writes stay ours when our socket sits past fd 4096",
  async () => {
    await runInnerDriver("os", "own_socket_inner.ts");
  },
);
