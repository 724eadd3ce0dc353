import assert from "node:assert/strict";
import { buildContext, contextInputs, contextKey } from "./context.ts";
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
    /"eth0": must be a valid CIDR or one of 'primary', 'localhost', 'all'/,
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

Deno.test("contextInputs: equal inputs give equal contexts, any input buildContext reads differs", () => {
  const st = state();
  const base = contextInputs(st, ["198.18.0.1"]);
  // Services and endpoints are not inputs: a change of them reuses the context.
  const svc = state([], { x: [] });
  assert.equal(contextInputs(svc, ["198.18.0.1"]), base);
  const zoned = { ...st, node: { ...st.node, labels: { "topology.kubernetes.io/zone": "z" } } };
  const variants = [
    contextInputs(st, ["198.18.0.2"]),
    contextInputs(st, undefined),
    contextInputs({ ...st, family: 6 }, ["198.18.0.1"]),
    contextInputs(zoned, ["198.18.0.1"]),
    contextInputs({ ...st, node: { ...st.node, ips: ["198.18.0.9"] } }, ["198.18.0.1"]),
    contextInputs({ ...st, node: { ...st.node, podCIDRs: [] } }, ["198.18.0.1"]),
    contextInputs({ ...st, serviceCIDRs: ["198.19.0.0/16"] }, ["198.18.0.1"]),
  ];
  for (const v of variants) assert.notEqual(v, base);
  assert.equal(new Set(variants).size, variants.length);
});

Deno.test("context: nodePortAddresses CIDRs select this host's interface addresses", () => {
  const host = ["127.0.0.1", "198.18.0.1", "198.18.5.7", "198.19.9.9", "::1", "2001:db8::9"];
  const ctx = (npa: string[]) =>
    buildContext(state(), { ...CFG, nodePortAddresses: npa }, host).nodePortIPs;
  // A secondary address the Node object does not list answers, as upstream's GetNodeIPs has it.
  assert.deepEqual(ctx(["198.18.0.0/16"]), ["198.18.0.1", "198.18.5.7"]);
  assert.deepEqual(ctx(["198.18.5.0/24"]), ["198.18.5.7"]);
  assert.deepEqual(ctx(["primary", "198.19.0.0/16"]), ["198.18.0.1", "198.19.9.9"]);
  assert.equal(ctx(["all"]), "all");
  // Loopback stays out of nodeport-ips (the kernel cannot DNAT it): a warning says so.
  const lo = buildContext(state(), { ...CFG, nodePortAddresses: ["primary", "localhost"] }, host);
  assert.deepEqual(lo.nodePortIPs, ["198.18.0.1"]);
  assert.ok(lo.warnings.some((w) => /selects 127\.0\.0\.1/.test(w)));
  // No matching address is a warning, not an error: the CIDR may match an address added later.
  const none = buildContext(state(), { ...CFG, nodePortAddresses: ["198.18.77.0/24"] }, host);
  assert.deepEqual(none.nodePortIPs, []);
  assert.ok(none.warnings.some((w) => /no IPv4 address matches/.test(w)));
});
