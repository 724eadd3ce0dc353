/** ClusterState: the Node (IPs, podCIDRs, bindAddress, nodeChanged), ServiceCIDRs, and the client-node types. */
import assert from "node:assert/strict";
import type { V1Node as ClientV1Node, V1ServiceCIDR } from "@kubernetes/client-node";
import type { V1Node } from "./k8s_types.ts";
import { ClusterState } from "./cluster_state.ts";
import { newState, node } from "./testdata/cluster_state.ts";

Deno.test("node: primary IPs, podCIDRs, nodeChanged", () => {
  const { cs, lines } = newState();
  let r = cs.apply();
  assert.equal(r.families[4].state.node.name, "me");
  assert.deepEqual(r.families[4].state.node.ips, []);

  const steps: {
    name: string;
    n: V1Node | null;
    changed: boolean;
    ips?: string[];
    cidrs?: string[];
  }[] = [
    {
      name: "first node",
      n: node({ "topology.kubernetes.io/zone": "z1" }),
      changed: true,
      ips: ["198.18.0.10", "2001:db8::10"],
      cidrs: ["198.18.64.0/24", "2001:db8:64::/64"],
    },
    { name: "same node again", n: node({ "topology.kubernetes.io/zone": "z1" }), changed: false },
    { name: "label changed", n: node({ "topology.kubernetes.io/zone": "z2" }), changed: true },
    {
      name: "podCIDR changed",
      n: node({ "topology.kubernetes.io/zone": "z2" }, { spec: { podCIDR: "198.18.65.0/24" } }),
      changed: true,
      cidrs: ["198.18.65.0/24"],
    },
    {
      name: "ExternalIP only",
      n: node({ "topology.kubernetes.io/zone": "z2" }, {
        spec: { podCIDR: "198.18.65.0/24" },
        status: { addresses: [{ type: "ExternalIP", address: "198.18.8.8" }] },
      }),
      changed: true,
      ips: ["198.18.8.8"],
    },
    { name: "node deleted", n: null, changed: true, ips: [], cidrs: [] },
  ];
  for (const s of steps) {
    cs.updateNode(s.n);
    r = cs.apply();
    assert.equal(r.nodeChanged, s.changed, s.name);
    if (s.ips) assert.deepEqual(r.families[6].state.node.ips, s.ips, s.name);
    if (s.cidrs) assert.deepEqual(r.families[4].state.node.podCIDRs, s.cidrs, s.name);
  }
  assert.equal(lines.length, 0);

  // Label changed and changed back before the apply: not a change.
  cs.updateNode(node({ a: "1" }));
  cs.apply();
  cs.updateNode(node({ a: "2" }));
  assert.ok(cs.hasPendingChanges());
  cs.updateNode(node({ a: "1" }));
  assert.ok(!cs.hasPendingChanges());
  assert.equal(cs.apply().nodeChanged, false);

  // Another node's object is ignored with a log line.
  assert.equal(cs.updateNode({ metadata: { name: "other", labels: { a: "9" } } }), false);
  assert.equal(lines.length, 1);
  assert.match(lines[0].msg, /other/);
});

Deno.test("node: bindAddress overrides its family; bad values are rejected", () => {
  const { cs } = newState({ bindAddress: ["2001:db8::99", "0.0.0.0"] });
  cs.updateNode(node({}));
  assert.deepEqual(cs.apply().families[4].state.node.ips, ["198.18.0.10", "2001:db8::99"]);
  assert.throws(
    () => new ClusterState({ nodeName: "me", bindAddress: ["nope"] }),
    /bind address "nope"/,
  );
  assert.throws(() => new ClusterState({ nodeName: "" }), /nodeName/);
});

Deno.test("node: bad addresses and podCIDRs are dropped with a log line", () => {
  const { cs, lines } = newState();
  cs.updateNode({
    metadata: { name: "me" },
    spec: { podCIDRs: ["bad", "198.18.64.0/24"] },
    status: {
      addresses: [{ type: "InternalIP", address: "x" }, {
        type: "InternalIP",
        address: "198.18.0.1",
      }],
    },
  });
  const n = cs.apply().families[4].state.node;
  assert.deepEqual(n.ips, ["198.18.0.1"]);
  assert.deepEqual(n.podCIDRs, ["198.18.64.0/24"]);
  assert.equal(lines.length, 2);
});

Deno.test("serviceCIDRs: split by family, none without objects, change flag", () => {
  const { cs, lines } = newState();
  let r = cs.apply();
  assert.equal(r.serviceCIDRsChanged, false);
  assert.deepEqual(r.families[4].state.serviceCIDRs, []);
  assert.deepEqual(r.families[6].state.serviceCIDRs, []);
  const k1 = {
    metadata: { name: "kubernetes" },
    spec: { cidrs: ["198.18.100.0/24", "2001:db8:100::/112"] },
  };
  cs.updateServiceCIDR(null, k1);
  r = cs.apply();
  assert.equal(r.serviceCIDRsChanged, true);
  assert.deepEqual(r.families[4].state.serviceCIDRs, ["198.18.100.0/24"]);
  assert.deepEqual(r.families[6].state.serviceCIDRs, ["2001:db8:100::/112"]);
  assert.equal(cs.updateServiceCIDR(k1, structuredClone(k1)), false);
  assert.equal(cs.apply().serviceCIDRsChanged, false);
  cs.updateServiceCIDR(null, {
    metadata: { name: "extra" },
    spec: { cidrs: ["198.18.99.0/24", "nope"] },
  });
  r = cs.apply();
  assert.deepEqual(r.families[4].state.serviceCIDRs, ["198.18.100.0/24", "198.18.99.0/24"]);
  assert.equal(lines.length, 1);
  cs.updateServiceCIDR(k1, null);
  cs.updateServiceCIDR({ metadata: { name: "extra" } }, null);
  r = cs.apply();
  assert.equal(r.serviceCIDRsChanged, true);
  assert.deepEqual(r.families[4].state.serviceCIDRs, []);
});

Deno.test("client-node V1Node and V1ServiceCIDR objects fit the structural types", () => {
  const { cs } = newState();
  const n: ClientV1Node = {
    metadata: { name: "me", labels: { a: "b" } },
    status: { addresses: [{ type: "InternalIP", address: "198.18.0.5" }] },
  };
  const c: V1ServiceCIDR = {
    metadata: { name: "kubernetes" },
    spec: { cidrs: ["198.18.128.0/17"] },
  };
  assert.equal(cs.updateNode(n), true);
  assert.equal(cs.updateServiceCIDR(null, c), true);
  const st = cs.apply().families[4].state;
  assert.deepEqual(st.node.ips, ["198.18.0.5"]);
  assert.deepEqual(st.serviceCIDRs, ["198.18.128.0/17"]);
});
