import assert from "node:assert/strict";
import type { EndpointInfo, ProxierConfig, ProxyState, ServicePortInfo } from "./model.ts";
import { buildBase, buildContext, buildRuleset, buildServicePort, contextKey } from "./rules.ts";
import { endpoint, servicePort } from "./model_testing.ts";

const svc = (id: string, o: Partial<ServicePortInfo> = {}) =>
  servicePort(id, { family: 4, clusterIP: "198.19.0.1", ...o });

const ep = (ip: string, o: Partial<EndpointInfo> = {}) => endpoint(ip, 8080, o);

const CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.128.0/17", "2001:db8:128::/48"] },
  nodePortAddresses: [],
};

function state(
  services: ServicePortInfo[] = [],
  eps: Record<string, EndpointInfo[]> = {},
): ProxyState {
  return {
    family: 4,
    services: new Map(services.map((s) => [s.id, s])),
    endpoints: new Map(Object.entries(eps)),
    node: {
      name: "n1",
      labels: {},
      ips: ["198.18.0.1", "2001:db8::1"],
      podCIDRs: ["198.18.129.0/24"],
    },
    serviceCIDRs: ["198.19.0.0/16", "198.20.0.0/24", "2001:db8:ffff::/112"],
  };
}

const ctx4 = () => buildContext(state(), CFG);

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

Deno.test("base: every map and set is bound by exactly one rule; no anonymous sets", () => {
  const base = buildBase(ctx4());
  const rules = base.chains.flatMap((c) => c.rules);
  for (const s of base.sets) {
    const users = rules.filter((r) => r.includes(`@${s.name}`));
    assert.equal(users.length, s.name === "nodeport-ips" ? 2 : 1, s.name);
  }
  for (const r of rules) assert.ok(!r.includes("{"), r);
  assert.deepEqual(base.chains.find((c) => c.chain.name === "cluster-ips-check")!.rules, [
    "ip daddr @cluster-ips reject",
    "ip daddr 198.19.0.0/16 drop",
    "ip daddr 198.20.0.0/24 drop",
  ]);
  assert.deepEqual(base.elements, [{ target: "nodeport-ips", key: ["198.18.0.1"] }]);
});

Deno.test("base: nodePortAddresses 0.0.0.0/0 uses fib and no nodeport-ips elements", () => {
  const base = buildBase(buildContext(state(), { ...CFG, nodePortAddresses: ["0.0.0.0/0"] }));
  const services = base.chains.find((c) => c.chain.name === "services")!.rules;
  assert.equal(
    services[1],
    "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports",
  );
  assert.deepEqual(base.elements, []);
});

Deno.test("service: one rule per endpoint, uniform numgen, masquerade rule first", () => {
  const s = svc("ns/a:http");
  const f = buildServicePort(
    s,
    [ep("198.18.129.1"), ep("198.18.129.2"), ep("198.18.130.3")],
    ctx4(),
  );
  assert.equal(f.chains.length, 1);
  assert.deepEqual(f.chains[0].rules, [
    "ip daddr 198.19.0.1 ip saddr != 198.18.128.0/17 meta mark set meta mark or 0x00004000",
    "meta l4proto tcp numgen random mod 3 0 dnat ip to 198.18.129.1:8080",
    "meta l4proto tcp numgen random mod 2 0 dnat ip to 198.18.129.2:8080",
    "meta l4proto tcp dnat ip to 198.18.130.3:8080",
  ]);
  assert.deepEqual(f.sets, []);
  const byTarget = (t: string) => f.elements.filter((e) => e.target === t);
  assert.deepEqual(byTarget("service-ips").map((e) => [e.key, e.value, e.comment]), [
    [["198.19.0.1", "tcp", "80"], ["goto service-JV5AMCJF-ns/a/tcp/http"], "ns/a:http"],
  ]);
  assert.equal(byTarget("cluster-ips").length, 1);
  assert.equal(byTarget("hairpin").length, 3);
});

Deno.test("service: masquerade-all and detection None", () => {
  const s = svc("ns/a:http");
  const all = buildServicePort(
    s,
    [ep("198.18.129.1")],
    buildContext(state(), { ...CFG, masqueradeAll: true }),
  );
  assert.equal(all.chains[0].rules[0], "ip daddr 198.19.0.1 meta mark set meta mark or 0x00004000");
  const none = buildServicePort(
    s,
    [ep("198.18.129.1")],
    buildContext(state(), { ...CFG, localDetector: { mode: "None" } }),
  );
  assert.deepEqual(none.chains[0].rules, ["meta l4proto tcp dnat ip to 198.18.129.1:8080"]);
});

Deno.test("service: no endpoints -> reject elements and no chains", () => {
  const s = svc("ns/a:http", { nodePort: 30001, externalIPs: ["198.18.100.1"] });
  const f = buildServicePort(s, [], ctx4());
  assert.deepEqual(f.chains, []);
  const v = f.elements.filter((e) => e.target.startsWith("no-endpoint")).map((
    e,
  ) => [e.target, e.key.join(" . "), e.value![0]]);
  assert.deepEqual(v, [
    ["no-endpoint-services", "198.19.0.1 . tcp . 80", "goto reject-chain"],
    ["no-endpoint-services", "198.18.100.1 . tcp . 80", "goto reject-chain"],
    ["no-endpoint-nodeports", "tcp . 30001", "goto reject-chain"],
  ]);
});

Deno.test("service: eTP=Local without local endpoints drops outside clients, short-circuits pods", () => {
  const s = svc("ns/a:http", { nodePort: 30001, externalPolicyLocal: true });
  const f = buildServicePort(s, [ep("198.18.130.1")], ctx4());
  assert.deepEqual(f.chains.map((c) => c.chain.name), [
    "service-JV5AMCJF-ns/a/tcp/http",
    "external-JV5AMCJF-ns/a/tcp/http",
  ]);
  // No final "goto local-...": outside clients fall through un-NATed.
  assert.deepEqual(f.chains[1].rules, [
    "ip saddr 198.18.128.0/17 goto service-JV5AMCJF-ns/a/tcp/http",
    "fib saddr type local meta mark set meta mark or 0x00004000",
    "fib saddr type local goto service-JV5AMCJF-ns/a/tcp/http",
  ]);
  const np = f.elements.filter((e) => e.key[1] === "30001").map((e) => [e.target, e.value![0]]);
  assert.deepEqual(np, [
    ["service-nodeports", "goto external-JV5AMCJF-ns/a/tcp/http"],
    ["no-endpoint-nodeports", "drop"],
  ]);
});

Deno.test("service: iTP=Local puts the masquerade rule in the local chain", () => {
  const s = svc("ns/a:http", { internalPolicyLocal: true });
  const f = buildServicePort(
    s,
    [ep("198.18.129.1", { isLocal: true }), ep("198.18.130.1")],
    ctx4(),
  );
  assert.deepEqual(f.chains.map((c) => c.chain.name), ["local-JV5AMCJF-ns/a/tcp/http"]);
  assert.deepEqual(f.chains[0].rules, [
    "ip daddr 198.19.0.1 ip saddr != 198.18.128.0/17 meta mark set meta mark or 0x00004000",
    "meta l4proto tcp dnat ip to 198.18.129.1:8080",
  ]);
});

Deno.test("service: eTP=Local external chain short-circuits pods and host", () => {
  const s = svc("ns/a:http", { nodePort: 30001, externalPolicyLocal: true });
  const f = buildServicePort(
    s,
    [ep("198.18.129.1", { isLocal: true }), ep("198.18.130.1")],
    ctx4(),
  );
  const ext = f.chains.find((c) => c.chain.name.startsWith("external-"))!;
  assert.deepEqual(ext.rules, [
    "ip saddr 198.18.128.0/17 goto service-JV5AMCJF-ns/a/tcp/http",
    "fib saddr type local meta mark set meta mark or 0x00004000",
    "fib saddr type local goto service-JV5AMCJF-ns/a/tcp/http",
    "goto local-JV5AMCJF-ns/a/tcp/http",
  ]);
  const local = f.chains.find((c) => c.chain.name.startsWith("local-"))!;
  assert.deepEqual(local.rules, ["meta l4proto tcp dnat ip to 198.18.129.1:8080"]);
});

Deno.test("service: firewall chain per source range, LB IP admitted when a range covers the node", () => {
  const s = svc("ns/a:http", {
    loadBalancerIPs: ["198.18.100.1"],
    loadBalancerSourceRanges: ["198.18.50.0/24", "198.18.0.0/24"],
  });
  const f = buildServicePort(s, [ep("198.18.129.1")], ctx4());
  const fw = f.chains.find((c) => c.chain.name.startsWith("firewall-"))!;
  assert.deepEqual(fw.rules, [
    "ip saddr 198.18.50.0/24 return",
    "ip saddr 198.18.0.0/24 return",
    "ip saddr 198.18.100.1 return",
    "drop",
  ]);
  assert.ok(f.elements.some((e) => e.target === "firewall-ips" && e.key[0] === "198.18.100.1"));
  assert.throws(
    () => buildServicePort({ ...s, loadBalancerSourceRanges: ["bogus"] }, [], ctx4()),
    /ns\/a:http: loadBalancerSourceRange "bogus" is not an IPv4 CIDR/,
  );
});

Deno.test("service: IPv6 dnat syntax and family mismatch error", () => {
  const st: ProxyState = { ...state(), family: 6 };
  const ctx6 = buildContext(st, CFG);
  const s = svc("ns/a:http", { family: 6, clusterIP: "2001:db8:ffff::1" });
  const f = buildServicePort(s, [ep("2001:db8:128::5")], ctx6);
  assert.deepEqual(f.chains[0].rules, [
    "ip6 daddr 2001:db8:ffff::1 ip6 saddr != 2001:db8:128::/48 meta mark set meta mark or 0x00004000",
    "meta l4proto tcp dnat ip6 to [2001:db8:128::5]:8080",
  ]);
  assert.throws(
    () => buildServicePort(s, [], ctx4()),
    /ns\/a:http is IPv6 but the ruleset is IPv4/,
  );
});

Deno.test("service fragment depends only on its own inputs", () => {
  const a = svc("ns/a:http");
  const b = svc("ns/b:http", { clusterIP: "198.19.0.2" });
  const eps = { [a.id]: [ep("198.18.129.1")], [b.id]: [ep("198.18.129.2")] };
  const alone = buildRuleset(state([a], eps), CFG).services.get(a.id);
  const together = buildRuleset(state([a, b], eps), CFG).services.get(a.id);
  assert.deepEqual(alone, together);
  assert.deepEqual(buildServicePort(a, eps[a.id], ctx4()), alone);
});

Deno.test("build is fast: 30k services x 10 endpoints", () => {
  const services: ServicePortInfo[] = [];
  const eps: Record<string, EndpointInfo[]> = {};
  for (let i = 0; i < 30000; i++) {
    const s = svc(`ns${i % 100}/svc${i}:http`, {
      clusterIP: `198.19.${i >> 8}.${i & 255}`,
      nodePort: i % 10 === 0 ? 30000 + i / 10 : 0,
    });
    services.push(s);
    eps[s.id] = Array.from(
      { length: 10 },
      (_, j) => ep(`198.18.${128 + (j * 7 + i) % 120}.${(i + j) & 255}`),
    );
  }
  const st = state(services, eps);
  buildRuleset(st, CFG); // warm up the JIT
  const t0 = performance.now();
  const built = buildRuleset(st, CFG);
  const ms = performance.now() - t0;
  console.log(`buildRuleset 30000 services x 10 endpoints: ${ms.toFixed(0)} ms`);
  assert.equal(built.services.size, 30000);
  assert.ok(ms < 1500, `took ${ms} ms`);
});

Deno.test("service: element comments are cut to nft's 128-byte limit", () => {
  const long = "x".repeat(63);
  const s = svc(`${long}/${long}:${long}`);
  const f = buildServicePort(s, [ep("198.18.129.1")], ctx4());
  for (const e of f.elements) {
    assert.ok(e.comment!.length <= 128);
    assert.ok(e.comment!.endsWith("..."));
  }
});

Deno.test("hairpin set holds only endpoints that may be on this node", () => {
  const remote = { ...ep("198.18.129.1"), isLocal: false, nodeName: "other-node" };
  const local = { ...ep("198.18.129.2"), isLocal: true, nodeName: "this-node" };
  const unknown = { ...ep("198.18.129.3"), isLocal: false, nodeName: undefined };
  const f = buildServicePort(svc("ns/a:http"), [remote, local, unknown], ctx4());
  const hairpin = f.elements.filter((e) => e.target === "hairpin").map((e) => e.key[0]);
  assert.deepEqual(hairpin.sort(), ["198.18.129.2", "198.18.129.3"]);
});
