import assert from "node:assert/strict";
import type { EndpointInfo, ServicePortInfo } from "../model.ts";
import { buildContext } from "./context.ts";
import { buildServiceRules } from "./service_rules.ts";
import { CFG, ctx4, ep, state, svc } from "./testing.ts";

const rules = (s: ServicePortInfo, eps: EndpointInfo[], ctx = ctx4()) =>
  buildServiceRules(s, eps, ctx);

Deno.test("service: the common port is elements only: a class verdict and its buckets", () => {
  const r = rules(svc("ns/a:http", { nodePort: 30001, externalIPs: ["198.18.100.1"] }), [
    ep("198.18.129.1"),
    ep("198.18.129.2"),
    ep("198.18.130.3"),
  ]);
  assert.deepEqual(r.chains, []);
  assert.deepEqual(r.sets, []);
  const buckets = ["198.18.129.1 . 8080", "198.18.129.2 . 8080", "198.18.130.3 . 8080"];
  assert.deepEqual(r.frontends, [
    {
      key: "198.19.0.1 . tcp . 80",
      nodePort: false,
      dispatch: { class: "dnat", proto: "tcp", endpoints: buckets },
    },
    {
      key: "198.18.100.1 . tcp . 80",
      nodePort: false,
      dispatch: { class: "external", proto: "tcp", endpoints: buckets },
    },
    {
      key: "tcp . 30001",
      nodePort: true,
      dispatch: { class: "nodeport", proto: "tcp", endpoints: buckets },
    },
  ]);
  assert.equal(r.clusterIP, "198.19.0.1");
  assert.equal(r.comment, "ns/a:http");
});

Deno.test("service: masquerading is global, so no rule depends on the detector", () => {
  const s = svc("ns/a:http");
  const eps = [ep("198.18.129.1")];
  const base = rules(s, eps);
  for (
    const cfg of [{ ...CFG, masqueradeAll: true }, {
      ...CFG,
      localDetector: { mode: "None" as const },
    }]
  ) {
    assert.deepEqual(rules(s, eps, buildContext(state(), cfg)), base);
  }
});

Deno.test("service: no endpoints -> reject elements, no dispatch", () => {
  const r = rules(svc("ns/a:http", { nodePort: 30001, externalIPs: ["198.18.100.1"] }), []);
  assert.deepEqual(r.chains, []);
  assert.deepEqual(r.frontends.map((f) => [f.key, f.dispatch, f.noEndpoint]), [
    ["198.19.0.1 . tcp . 80", undefined, "goto reject-chain"],
    ["198.18.100.1 . tcp . 80", undefined, "goto reject-chain"],
    ["tcp . 30001", undefined, "goto reject-chain"],
  ]);
});

Deno.test("service: iTP=Local sends ClusterIP traffic to local endpoints only", () => {
  const r = rules(svc("ns/a:http", { internalPolicyLocal: true }), [
    ep("198.18.129.1", { isLocal: true }),
    ep("198.18.130.1"),
  ]);
  assert.deepEqual(r.frontends[0].dispatch, {
    class: "dnat",
    proto: "tcp",
    endpoints: ["198.18.129.1 . 8080"],
  });
  const none = rules(svc("ns/a:http", { internalPolicyLocal: true }), [ep("198.18.130.1")]);
  assert.equal(none.frontends[0].dispatch, undefined);
  assert.equal(none.frontends[0].noEndpoint, "drop", "endpoints exist elsewhere: drop");
});

Deno.test("service: eTP=Local without local endpoints drops outside clients, short-circuits pods", () => {
  const s = svc("ns/a:http", { nodePort: 30001, externalPolicyLocal: true });
  const r = rules(s, [ep("198.18.130.1")]);
  assert.deepEqual(r.chains.map((c) => c.chain.name), [
    "service-JV5AMCJF-ns/a/tcp/http",
    "external-JV5AMCJF-ns/a/tcp/http",
  ]);
  // No final "goto local-...": outside clients fall through un-NATed.
  assert.deepEqual(r.chains[1].rules, [
    "ip saddr 198.18.128.0/17 goto service-JV5AMCJF-ns/a/tcp/http",
    "fib saddr type local meta mark set meta mark | 0x00004000",
    "fib saddr type local goto service-JV5AMCJF-ns/a/tcp/http",
  ]);
  const np = r.frontends.find((f) => f.nodePort)!;
  assert.deepEqual(np.dispatch, { chain: "external-JV5AMCJF-ns/a/tcp/http" });
  assert.equal(np.noEndpoint, "drop");
  assert.deepEqual(r.frontends[0].dispatch, { chain: "service-JV5AMCJF-ns/a/tcp/http" });
});

Deno.test("service: eTP=Local external chain short-circuits pods and host", () => {
  const s = svc("ns/a:http", { nodePort: 30001, externalPolicyLocal: true });
  const r = rules(s, [ep("198.18.129.1", { isLocal: true }), ep("198.18.130.1")]);
  const ext = r.chains.find((c) => c.chain.name.startsWith("external-"))!;
  assert.deepEqual(ext.rules, [
    "ip saddr 198.18.128.0/17 goto service-JV5AMCJF-ns/a/tcp/http",
    "fib saddr type local meta mark set meta mark | 0x00004000",
    "fib saddr type local goto service-JV5AMCJF-ns/a/tcp/http",
    "goto local-JV5AMCJF-ns/a/tcp/http",
  ]);
  const local = r.chains.find((c) => c.chain.name.startsWith("local-"))!;
  assert.deepEqual(local.rules, ["meta l4proto tcp dnat ip to 198.18.129.1:8080"]);
});

Deno.test("service: affinity keeps a chain with one rule per endpoint, uniform numgen", () => {
  const r = rules(svc("ns/a:http", { stickyMaxAgeSeconds: 600 }), [
    ep("198.18.129.1"),
    ep("198.18.129.2"),
    ep("198.18.130.3"),
  ]);
  assert.equal(r.chains.length, 1);
  assert.equal(r.sets.length, 3);
  const sets = r.sets.map((s) => s.name);
  assert.deepEqual(r.chains[0].rules.slice(3), [
    `meta l4proto tcp numgen random mod 3 0 update @${
      sets[0]
    } { ip saddr } dnat ip to 198.18.129.1:8080`,
    `meta l4proto tcp numgen random mod 2 0 update @${
      sets[1]
    } { ip saddr } dnat ip to 198.18.129.2:8080`,
    `meta l4proto tcp update @${sets[2]} { ip saddr } dnat ip to 198.18.130.3:8080`,
  ]);
  assert.deepEqual(r.frontends[0].dispatch, { chain: "service-JV5AMCJF-ns/a/tcp/http" });
});

Deno.test("service: firewall chain per source range, LB IP admitted when a range covers the node", () => {
  const s = svc("ns/a:http", {
    loadBalancerIPs: ["198.18.100.1"],
    loadBalancerSourceRanges: ["198.18.50.0/24", "198.18.0.0/24"],
  });
  const r = rules(s, [ep("198.18.129.1")]);
  const fw = r.chains.find((c) => c.chain.name.startsWith("firewall-"))!;
  assert.deepEqual(fw.rules, [
    "ip saddr 198.18.50.0/24 return",
    "ip saddr 198.18.0.0/24 return",
    "ip saddr 198.18.100.1 return",
    "drop",
  ]);
  const lb = r.frontends.find((f) => f.key.startsWith("198.18.100.1 "))!;
  assert.equal(lb.firewall, fw.chain.name);
  assert.equal(r.frontends[0].firewall, undefined, "the ClusterIP is not filtered");
  assert.throws(
    () => rules({ ...s, loadBalancerSourceRanges: ["bogus"] }, []),
    /ns\/a:http: loadBalancerSourceRange "bogus" is not an IPv4 CIDR/,
  );
});

Deno.test("service: an address listed twice is one frontend", () => {
  const r = rules(
    svc("ns/a:http", {
      externalIPs: ["198.18.100.1"],
      loadBalancerIPs: ["198.18.100.1"],
      loadBalancerSourceRanges: ["198.18.50.0/24"],
    }),
    [ep("198.18.129.1")],
  );
  const twice = r.frontends.filter((f) => f.key === "198.18.100.1 . tcp . 80");
  assert.equal(twice.length, 1);
  assert.ok(twice[0].firewall !== undefined, "the filtered one wins");
});

Deno.test("service: IPv6 buckets and family mismatch error", () => {
  const ctx6 = buildContext({ ...state(), family: 6 }, CFG);
  const s = svc("ns/a:http", { family: 6, clusterIP: "2001:db8:ffff::1" });
  const r = rules(s, [ep("2001:db8:128::5")], ctx6);
  assert.deepEqual(r.frontends[0], {
    key: "2001:db8:ffff::1 . tcp . 80",
    nodePort: false,
    dispatch: { class: "dnat", proto: "tcp", endpoints: ["2001:db8:128::5 . 8080"] },
  });
  assert.throws(() => rules(s, []), /ns\/a:http is IPv6 but the ruleset is IPv4/);
});

Deno.test("service: element comments are cut to nft's 128-byte limit", () => {
  const long = "x".repeat(63);
  const r = rules(svc(`${long}/${long}:${long}`), [ep("198.18.129.1")]);
  assert.equal(r.comment.length, 128);
  assert.ok(r.comment.endsWith("..."));
});

Deno.test("hairpin holds only endpoints that may be on this node", () => {
  const remote = { ...ep("198.18.129.1"), isLocal: false, nodeName: "other-node" };
  const local = { ...ep("198.18.129.2"), isLocal: true, nodeName: "this-node" };
  const unknown = { ...ep("198.18.129.3"), isLocal: false, nodeName: undefined };
  const r = rules(svc("ns/a:http"), [remote, local, unknown]);
  assert.deepEqual(r.hairpin.sort(), ["198.18.129.2", "198.18.129.3"]);
});

Deno.test("build is fast: 30k services x 10 endpoints", () => {
  const ctx = ctx4();
  const all: [ServicePortInfo, EndpointInfo[]][] = [];
  for (let i = 0; i < 30000; i++) {
    const s = svc(`ns${i % 100}/svc${i}:http`, {
      clusterIP: `198.19.${i >> 8}.${i & 255}`,
      nodePort: i % 10 === 0 ? 30000 + i / 10 : 0,
    });
    all.push([
      s,
      Array.from(
        { length: 10 },
        (_, j) => ep(`198.18.${128 + (j * 7 + i) % 120}.${(i + j) & 255}`),
      ),
    ]);
  }
  for (const [s, e] of all) buildServiceRules(s, e, ctx); // warm up the JIT
  const t0 = performance.now();
  for (const [s, e] of all) buildServiceRules(s, e, ctx);
  const ms = performance.now() - t0;
  console.log(`buildServiceRules x 30000 (10 endpoints each): ${ms.toFixed(0)} ms`);
  assert.ok(ms < 1500, `took ${ms} ms`);
});
