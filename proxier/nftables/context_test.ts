import assert from "node:assert/strict";
import { buildContext, contextKey } from "./context.ts";
import { CFG, ctx4, state } from "./testing.ts";

Deno.test("context: family filtering, mark, nodeport IPs, detector", () => {
  const c = ctx4();
  assert.equal(c.ip, "ip");
  assert.deepEqual(c.nodeIPs, ["198.18.0.1"]);
  assert.deepEqual(c.nodePortIPs, ["198.18.0.1"]);
  assert.deepEqual(c.serviceCIDRs, ["198.19.0.0/16", "198.20.0.0/24"]);
  assert.equal(c.masqMark, "0x00004000");
  assert.deepEqual(c.localMatches, ["ip saddr 198.18.128.0/17"]);
  assert.equal(c.notLocal, "ip saddr != 198.18.128.0/17");
  assert.equal(buildContext(state(), { ...CFG, masqueradeBit: 31 }).masqMark, "0x80000000");
  const all = buildContext(state(), { ...CFG, nodePortAddresses: ["0.0.0.0/0"] });
  assert.equal(all.nodePortIPs, "all");
  // Another family's CIDR does not make IPv4 "all".
  assert.deepEqual(
    buildContext(state(), { ...CFG, nodePortAddresses: ["::/0", "primary"] }).nodePortIPs,
    [
      "198.18.0.1",
    ],
  );
});

Deno.test("context: NodeCIDR uses the node's podCIDR; missing one is a warning", () => {
  const c = buildContext(state(), { ...CFG, localDetector: { mode: "NodeCIDR" } });
  assert.equal(c.notLocal, "ip saddr != 198.18.129.0/24");
  const st = state();
  const noCidr = buildContext({ ...st, node: { ...st.node, podCIDRs: [] } }, {
    ...CFG,
    localDetector: { mode: "NodeCIDR" },
  });
  assert.equal(noCidr.notLocal, undefined);
  assert.ok(noCidr.warnings.some((w) => w.includes("podCIDR")));
});

Deno.test("context: bad configuration is rejected with the offending value", () => {
  assert.throws(
    () => buildContext(state(), { ...CFG, masqueradeBit: 32 }),
    /masqueradeBit must be an integer 0-31, got 32/,
  );
  assert.throws(
    () => buildContext(state(), { ...CFG, nodePortAddresses: ["eth0"] }),
    /"eth0" is neither "primary" nor a CIDR/,
  );
  assert.throws(
    () =>
      buildContext(state(), {
        ...CFG,
        localDetector: { mode: "ClusterCIDR", cidrs: ["10.0.0.0/33"] },
      }),
    /"10.0.0.0\/33" is not a CIDR/,
  );
});

Deno.test("contextKey changes with rule-relevant context only", () => {
  const a = contextKey(ctx4());
  assert.equal(contextKey(ctx4()), a);
  assert.notEqual(contextKey(buildContext(state(), { ...CFG, masqueradeAll: true })), a);
  const st = state();
  const zoned = { ...st, node: { ...st.node, labels: { "topology.kubernetes.io/zone": "z" } } };
  assert.notEqual(contextKey(buildContext(zoned, CFG)), a);
  // Labels topology does not look at do not force a rebuild.
  const other = { ...st, node: { ...st.node, labels: { "example.com/x": "y" } } };
  assert.equal(contextKey(buildContext(other, CFG)), a);
});
