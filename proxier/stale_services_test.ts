import assert from "node:assert/strict";
import { servicePort } from "./model_testing.ts";
import type { ServicePortInfo } from "./model.ts";
import { unclaimedDeleted } from "./stale_services.ts";

function udp(name: string, clusterIP: string, more: Partial<ServicePortInfo> = {}) {
  return servicePort(name, { name, portName: "", protocol: "UDP", clusterIP, port: 53, ...more });
}

const GONE = udp("gone", "198.19.0.10", {
  externalIPs: ["198.18.50.1"],
  loadBalancerIPs: ["198.18.60.1"],
  nodePort: 30053,
});

Deno.test("unclaimedDeleted keeps a deleted port whole when nothing current claims its frontends", () => {
  const current = [udp("other", "198.19.0.11"), udp("ext", "198.19.0.12", { port: 54 })];
  assert.deepEqual(unclaimedDeleted([GONE], current), [GONE]);
  assert.deepEqual(unclaimedDeleted([], current), []);
});

Deno.test("unclaimedDeleted leaves out frontends and NodePorts a current UDP port claims", () => {
  const current = [
    udp("new", "198.19.0.20", { externalIPs: ["198.18.50.1"], nodePort: 30053 }),
    // The same LB IP on TCP is no claim on the UDP flows.
    udp("tcp", "198.19.0.21", { protocol: "TCP", loadBalancerIPs: ["198.18.60.1"] }),
  ];
  const [left] = unclaimedDeleted([GONE], current);
  assert.equal(left.clusterIP, "198.19.0.10");
  assert.deepEqual(left.externalIPs, []);
  assert.deepEqual(left.loadBalancerIPs, ["198.18.60.1"]);
  assert.equal(left.nodePort, 0);
});

Deno.test("unclaimedDeleted drops a deleted port whose frontends are all claimed again", () => {
  const gone = udp("gone", "198.19.0.10");
  assert.deepEqual(unclaimedDeleted([gone], [udp("again", "198.19.0.10")]), []);
});
