/**
 * Behaviour of the built ruleset, checked by tracing packets through it: hairpin, affinity,
 * IPv6, refusals and reasons, one test each (the table of packets is tracer_cases_test.ts).
 */
import assert from "node:assert/strict";
import type { ProxyState } from "../../model.ts";
import { buildContext } from "../context.ts";
import { trace } from "./tracer.ts";
import { tableReader } from "./reader.ts";
import { programFake } from "../../../tests/programmed.ts";
import {
  BASE_CFG,
  CLIENT,
  ep,
  EP_L1,
  EP_R,
  L1,
  NODE,
  NODE_IP,
  p,
  POD,
  R,
  state4,
  svc,
  tracerFor,
} from "./testdata/cluster.ts";

Deno.test("trace: hairpin masquerades only the path back to the sender", async () => {
  const r = await (await tracerFor())(p("pod", EP_L1, "198.19.0.1", 80));
  const byTarget = new Map(r.branches.map((b) => [b.dnat, b.masquerade]));
  assert.equal(byTarget.get(L1), true);
  assert.equal(byTarget.get(R), false);
});

Deno.test("trace: affinity rules come before the random choice and feed the sets", async () => {
  const { fake } = await programFake(state4(), BASE_CFG);
  const table = fake.state()!;
  const sets = [...table.sets.values()].filter((s) => s.set.name.includes("ns/sticky"));
  assert.equal(sets.length, 2);
  for (const { set: s } of sets) {
    assert.deepEqual(s.flags, ["dynamic", "timeout"]);
    assert.equal(s.timeout, 10800);
  }
  const chain = [...table.chains.values()].find((c) => c.chain.name.includes("ns/sticky/"))!;
  const rules = chain.rules.map((r) => r.rule);
  assert.match(
    rules[0],
    /^ip saddr @affinity-\S+ update @affinity-\S+ \{ ip saddr \} meta l4proto tcp dnat ip to /,
  );
  assert.match(rules[2], /numgen random mod 2 0 update @affinity-/);
  // A client already in an affinity set goes straight to its endpoint.
  const aff = [...table.sets.keys()].find((n) => n.includes("ns/sticky") && n.includes(EP_R))!;
  table.sets.get(aff)!.elements.push({ kind: "element", set: aff, key: [POD] });
  const r = await trace(tableReader(table), p("pod", POD, "198.19.0.11", 80), {
    nodeIPs: [NODE_IP],
  });
  assert.deepEqual(r.dnat, [R]);
});

Deno.test("trace: IPv6 ClusterIP and NodePort", async () => {
  const s6 = svc("ns/v6:http", {
    family: 6,
    clusterIP: "2001:db8:ffff::10",
    nodePort: 30600,
  });
  const st: ProxyState = {
    family: 6,
    services: new Map([[s6.id, s6]]),
    endpoints: new Map([[s6.id, [ep("2001:db8:129::11"), ep("2001:db8:130::11")]]]),
    node: NODE,
    serviceCIDRs: ["2001:db8:ffff::/112"],
  };
  const t = await tracerFor({}, st);
  const r = await t(p("pod", "2001:db8:129::10", "2001:db8:ffff::10", 80));
  assert.equal(r.verdict, "ACCEPT");
  assert.deepEqual(r.dnat, ["[2001:db8:129::11]:8080", "[2001:db8:130::11]:8080"]);
  assert.equal(r.masquerade, false);
  const np = await t(p("offnode", "2001:db8:50::5", "2001:db8::1", 30600));
  assert.equal(np.verdict, "ACCEPT");
  assert.equal(np.masquerade, true);
  assert.equal((await t(p("pod", "2001:db8:129::10", "2001:db8:ffff::99", 80))).verdict, "DROP");
  assert.equal((await t(p("pod", "2001:db8:129::10", "2001:db8:ffff::10", 81))).verdict, "REJECT");
});

Deno.test("trace: the rules serve no NodePorts on loopback, and say so", () => {
  const ctx = buildContext(state4(), { ...BASE_CFG, nodePortAddresses: ["127.0.0.0/8"] });
  assert.ok(ctx.warnings.some((w) => /do not serve NodePorts on loopback/.test(w)));
  assert.deepEqual(ctx.nodePortIPs, []);
});

Deno.test("tracer: unknown syntax throws instead of being ignored", async () => {
  const table = (await programFake(state4(), BASE_CFG)).fake.state()!;
  table.chains.get("services")!.rules.unshift({
    kind: "rule",
    chain: "services",
    rule: "tcp flags syn limit rate 10/second",
  });
  await assert.rejects(
    () => trace(tableReader(table), p("pod", POD, "198.19.0.1", 80), { nodeIPs: [NODE_IP] }),
    /cannot interpret/,
  );
});

Deno.test("trace: candidates carry their share; each path has steps and a reason", async () => {
  const t = await tracerFor();
  const r = await t(p("pod", POD, "198.19.0.1", 80));
  assert.deepEqual(r.candidates, [
    { dnat: L1, probability: 0.5, masquerade: false },
    { dnat: R, probability: 0.5, masquerade: false },
  ]);
  assert.match(r.reason, /^DNAT to endpoint /);
  const steps = r.branches[0].steps;
  assert.ok(
    steps.some((s) => s.element?.startsWith("frontends-dnat-tcp-2: 198.19.0.1 . tcp . 80")),
    JSON.stringify(steps),
  );
  assert.ok(steps.some((s) => s.element?.startsWith("endpoints-tcp: 198.19.0.1 . tcp . 80 . ")));
  // Own chains: one rule per endpoint, numgen mod (N-i) -> still 1/N each.
  const sticky = await t(p("pod", POD, "198.19.0.11", 80));
  assert.deepEqual(sticky.candidates.map((c) => c.probability), [0.5, 0.5]);
});

Deno.test("trace: reasons for refused packets", async () => {
  const t = await tracerFor();
  assert.equal((await t(p("pod", POD, "198.19.0.10", 80))).reason, "the Service has no endpoints");
  assert.equal(
    (await t(p("offnode", CLIENT, NODE_IP, 30008))).reason,
    "no endpoint this traffic may use (traffic policy Local, none on this node)",
  );
  assert.equal(
    (await t(p("pod", POD, "198.19.0.1", 81))).reason,
    "the ClusterIP has no such port and protocol",
  );
  assert.match((await t(p("pod", POD, "198.19.7.7", 80))).reason, /^unallocated ClusterIP/);
  assert.equal(
    (await t(p("offnode", "198.18.60.1", "198.18.100.1", 80))).reason,
    "source not in loadBalancerSourceRanges",
  );
  assert.match((await t(p("offnode", CLIENT, "198.18.200.1", 80))).reason, /^not translated/);
});

Deno.test("trace: UDP to a loopback NodePort is rejected and counted while the localhost proxy serves", async () => {
  const base = state4();
  const udp = svc("ns/udpnp:dns", {
    clusterIP: "198.19.0.40",
    protocol: "UDP",
    port: 53,
    nodePort: 30053,
  });
  const st: ProxyState = {
    ...base,
    services: new Map([...base.services, [udp.id, udp]]),
    endpoints: new Map([...base.endpoints, [udp.id, [ep(EP_R)]]]),
  };
  const on = await tracerFor({ localhostNodePorts: [4] }, st);
  assert.equal((await on(p("host", "127.0.0.1", "127.0.0.1", 30053, "udp"))).verdict, "REJECT");
  // The rule's counter is named: the tracer reads past it to the verdict.
  assert.notEqual((await on(p("host", "127.0.0.1", "127.0.0.1", 30004, "tcp"))).verdict, "REJECT");
  const off = await tracerFor({}, st);
  assert.notEqual((await off(p("host", "127.0.0.1", "127.0.0.1", 30053, "udp"))).verdict, "REJECT");
});

Deno.test("trace: a Service of more than 16 endpoints is served from the large bucket map", async () => {
  const base = state4();
  const big = svc("ns/big:http", { clusterIP: "198.19.0.99", nodePort: 30099 });
  const eps = Array.from({ length: 20 }, (_, i) => ep(`198.18.131.${i + 1}`));
  const st: ProxyState = {
    ...base,
    services: new Map([...base.services, [big.id, big]]),
    endpoints: new Map([...base.endpoints, [big.id, eps]]),
  };
  const { fake } = await programFake(st, BASE_CFG);
  assert.ok(fake.dump().includes("numgen random mod 20 map @endpoints-large-tcp"));
  const tr = await tracerFor({}, st);
  for (const pkt of [p("pod", POD, "198.19.0.99", 80), p("offnode", CLIENT, NODE_IP, 30099)]) {
    const r = await tr(pkt);
    assert.deepEqual(r.dnat, eps.map((e) => `${e.ip}:8080`).sort());
    for (const c of r.candidates) assert.ok(Math.abs(c.probability - 1 / 20) < 1e-9, c.dnat);
  }
});
