import assert from "node:assert/strict";
import { buildContext } from "./context.ts";
import { buildSkeleton, classChain, classDispatchChains } from "./skeleton.ts";
import { CFG, ctx4, state } from "./testing.ts";

const rulesOf = (name: string, cfg = CFG) =>
  buildSkeleton(buildContext(state(), cfg), 0).chains.find((c) => c.chain.name === name)!.rules;

Deno.test("skeleton: each map and set is bound by one or two rules; no anonymous sets", () => {
  const sk = buildSkeleton(ctx4(), 0);
  const dispatch = classDispatchChains(ctx4(), []);
  const rules = [...sk.chains, ...dispatch].flatMap((c) => c.rules);
  for (const s of sk.sets) {
    const users = rules.filter((r) => r.includes(`@${s.name}`)).length;
    // The endpoint maps are bound by the class chains only.
    const want = s.name.includes("endpoints")
      ? 0
      : ["nodeport-ips", "cluster-ips"].includes(s.name)
      ? 2
      : 1;
    assert.equal(users, want, s.name);
  }
  for (const r of rules) assert.ok(!r.includes("{"), r);
  assert.deepEqual(rulesOf("cluster-ips-check"), [
    "ip daddr @cluster-ips reject",
    "ip daddr 198.19.0.0/16 drop",
    "ip daddr 198.20.0.0/24 drop",
  ]);
  assert.deepEqual(sk.nodePortIPs, ["198.18.0.1"]);
});

Deno.test("skeleton: one rule per class in use, fewest endpoints first, NodePorts apart", () => {
  const classes = ["dnat-tcp-10", "external-dnat-udp-2", "nodeport-dnat-tcp-3", "dnat-tcp-2"];
  const [svc, np] = classDispatchChains(ctx4(), classes);
  assert.deepEqual(svc.rules, [
    "ip daddr . meta l4proto . th dport @frontends-dnat-tcp-2 goto dnat-tcp-2",
    "ip daddr . meta l4proto . th dport @frontends-external-dnat-udp-2 goto external-dnat-udp-2",
    "ip daddr . meta l4proto . th dport @frontends-dnat-tcp-10 goto dnat-tcp-10",
  ]);
  assert.deepEqual(np.rules, [
    "meta l4proto . th dport vmap @service-nodeports",
    "meta l4proto . th dport @frontends-nodeport-dnat-tcp-3 goto nodeport-dnat-tcp-3",
  ]);
});

Deno.test("skeleton: ClusterIP traffic from outside the pod network is marked, per detector", () => {
  assert.equal(
    rulesOf("services")[0],
    "ip daddr @cluster-ips ip saddr != 198.18.128.0/17 meta mark set meta mark | 0x00004000",
  );
  assert.equal(
    rulesOf("services", { ...CFG, masqueradeAll: true })[0],
    "ip daddr @cluster-ips meta mark set meta mark | 0x00004000",
  );
  assert.equal(
    rulesOf("services", {
      ...CFG,
      localDetector: { mode: "InterfaceNamePrefix", prefix: "veth" },
    })[0],
    'ip daddr @cluster-ips iifname != "veth*" meta mark set meta mark | 0x00004000',
  );
  const none = rulesOf("services", { ...CFG, localDetector: { mode: "None" } });
  assert.ok(none[0].includes("vmap @service-ips"), "nothing to mark by without a detector");
});

Deno.test("skeleton: nodePortAddresses 0.0.0.0/0 uses fib and no nodeport-ips elements", () => {
  const sk = buildSkeleton(buildContext(state(), { ...CFG, nodePortAddresses: ["0.0.0.0/0"] }), 0);
  const services = sk.chains.find((c) => c.chain.name === "services")!.rules;
  assert.equal(
    services.at(-1),
    "fib daddr type local ip daddr != 127.0.0.0/8 jump nodeport-dispatch",
  );
  assert.deepEqual(sk.nodePortIPs, []);
});

Deno.test("skeleton: class chains pick a bucket of the frontend; generations are separate", () => {
  const ctx = ctx4();
  assert.deepEqual(classChain(ctx, "dnat", "tcp", 3, 0), {
    chain: { kind: "chain", name: "dnat-tcp-3" },
    rules: [
      "dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 3 map @endpoints-tcp",
    ],
  });
  assert.deepEqual(classChain(ctx, "nodeport", "udp", 2, 1).rules, [
    "meta mark set meta mark | 0x00004000",
    "dnat ip to meta l4proto . th dport . numgen random mod 2 map @nodeport-endpoints-udp-g1",
  ]);
  assert.equal(classChain(ctx, "external", "sctp", 5, 0).chain.name, "external-dnat-sctp-5");
  const g1 = buildSkeleton(ctx, 1).sets.filter((s) => s.name.includes("endpoints"));
  assert.deepEqual(g1.map((s) => s.name), [
    "endpoints-tcp-g1",
    "nodeport-endpoints-tcp-g1",
    "endpoints-large-tcp-g1",
    "nodeport-endpoints-large-tcp-g1",
    "endpoints-udp-g1",
    "nodeport-endpoints-udp-g1",
    "endpoints-large-udp-g1",
    "nodeport-endpoints-large-udp-g1",
    "endpoints-sctp-g1",
    "nodeport-endpoints-sctp-g1",
    "endpoints-large-sctp-g1",
    "nodeport-endpoints-large-sctp-g1",
  ]);
  // Above the reserved range a class chain binds only the large map (its walk stays small).
  assert.deepEqual(classChain(ctx, "dnat", "tcp", 16, 0).rules, [
    "dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 16 map @endpoints-tcp",
  ]);
  assert.deepEqual(
    classChain(ctx, "nodeport", "tcp", 17, 0).rules.at(-1),
    "dnat ip to meta l4proto . th dport . numgen random mod 17 map @nodeport-endpoints-large-tcp",
  );
  // libnftables 1.0.6 aborts on a typeof map whose comment does not fit its userdata buffer
  // (measured with nft: 78 characters fit, 96 abort the process).
  const ctx6 = buildContext({ ...state(), family: 6 }, CFG);
  for (const m of [...buildSkeleton(ctx, 0).sets, ...buildSkeleton(ctx6, 0).sets]) {
    if (m.kind === "map" && m.type.startsWith("typeof")) {
      assert.ok((m.comment ?? "").length <= 78, `${m.name}: comment of ${m.comment?.length}`);
    }
  }
  // The value's protocol puts a matching l4proto check into the class chain (see skeleton.ts).
  assert.ok(
    g1.every((m) => m.kind === "map" && m.dataType.endsWith(` ${m.name.split("-").at(-2)} dport`)),
  );
});
