import assert from "node:assert/strict";
import { renderScript } from "../ffi/nftables/script.ts";
import type { Operation } from "../ffi/nftables/types.ts";
import type { Fragment } from "./fragment.ts";
import {
  commitPlan,
  correctFromKernel,
  planFull,
  planPartial,
  planStaleDeletion,
  type SyncPlan,
} from "./sync_plan.ts";
import { BASE_ID, WrittenState } from "./written_state.ts";

const base: Fragment = {
  chains: [{
    chain: { kind: "chain", name: "services" },
    rules: ["ip daddr . meta l4proto . th dport vmap @service-ips"],
  }],
  sets: [
    {
      kind: "map",
      name: "service-ips",
      type: "ipv4_addr . inet_proto . inet_service",
      dataType: "verdict",
    },
    { kind: "set", name: "cluster-ips", type: "ipv4_addr" },
  ],
  elements: [],
};

function svc(name: string, ip: string, eps: string[], opts: { affinity?: number } = {}): Fragment {
  const chain = `service-${name}`;
  const sets = opts.affinity
    ? [{
      kind: "set" as const,
      name: `aff-${name}`,
      type: "ipv4_addr",
      flags: ["dynamic" as const, "timeout" as const],
      timeout: opts.affinity,
    }]
    : [];
  return {
    chains: [{
      chain: { kind: "chain", name: chain },
      rules: eps.map((e) =>
        `meta l4proto tcp${
          opts.affinity ? ` update @aff-${name} { ip saddr }` : ""
        } dnat ip to ${e}:80`
      ),
    }],
    sets,
    elements: [
      { target: "service-ips", key: [ip, "tcp", "80"], value: [`goto ${chain}`], comment: name },
      { target: "cluster-ips", key: [ip], comment: name },
    ],
  };
}

function script(plan: SyncPlan): string {
  return plan.txs.map((t) => renderScript("ip", "kube-proxy", t.ops)).join("---\n");
}

function kinds(ops: readonly Operation[]): string[] {
  return ops.map((o) => `${o.verb} ${o.obj.kind}`);
}

function start(...frags: [string, Fragment][]): WrittenState {
  const w = new WrittenState();
  const p = planFull(w, new Map([[BASE_ID, base], ...frags]), "k");
  commitPlan(w, p, 0);
  return w;
}

Deno.test("plan: cold full sync orders table, sets, chains, rules, elements", () => {
  const w = new WrittenState();
  const p = planFull(
    w,
    new Map([[BASE_ID, base], ["a", svc("a", "198.18.0.1", ["198.19.0.1"])]]),
    "k",
  );
  assert.equal(p.txs.length, 1);
  assert.deepEqual(kinds(p.txs[0].ops), [
    "add table",
    "add map",
    "add set",
    "add chain",
    "add rule",
    "add chain",
    "add rule",
    "add element",
    "add element",
  ]);
});

Deno.test("plan: shared elements are reference-counted", () => {
  // Two ports of one Service share the ClusterIP in cluster-ips.
  const a = svc("a", "198.18.0.1", ["198.19.0.1"]);
  const b: Fragment = {
    ...svc("b", "198.18.0.1", ["198.19.0.2"]),
    elements: [
      { target: "service-ips", key: ["198.18.0.1", "tcp", "81"], value: ["goto service-b"] },
      { target: "cluster-ips", key: ["198.18.0.1"], comment: "b" },
    ],
  };
  const w = start(["a", a], ["b", b]);
  assert.equal(w.elements.get("cluster-ips\u0000198.18.0.1")!.refs, 2);
  const p = planPartial(w, new Map([["a", null]]));
  const s = script(p);
  assert.match(s, /delete element ip kube-proxy service-ips \{ 198\.18\.0\.1 \. tcp \. 80 \}/);
  assert.doesNotMatch(s, /cluster-ips/, "still owned by b");
  commitPlan(w, p, 0);
  assert.equal(w.elements.get("cluster-ips\u0000198.18.0.1")!.refs, 1);
  const p2 = planPartial(w, new Map([["b", null]]));
  assert.match(script(p2), /delete element ip kube-proxy cluster-ips \{ 198\.18\.0\.1 \}/);
});

Deno.test("plan: a changed element value is deleted and re-added in the same transaction", () => {
  const w = start(["a", svc("a", "198.18.0.1", ["198.19.0.1"])]);
  const moved: Fragment = {
    ...svc("a", "198.18.0.1", ["198.19.0.1"]),
    elements: [
      { target: "service-ips", key: ["198.18.0.1", "tcp", "80"], value: ["goto reject-chain"] },
      { target: "cluster-ips", key: ["198.18.0.1"], comment: "a" },
    ],
  };
  const p = planPartial(w, new Map([["a", moved]]));
  assert.equal(p.txs.length, 1);
  assert.deepEqual(kinds(p.txs[0].ops), ["delete element", "add element"]);
});

Deno.test("plan: changed rules rewrite the chain atomically (add + flush + rules)", () => {
  const w = start(["a", svc("a", "198.18.0.1", ["198.19.0.1"])]);
  const p = planPartial(w, new Map([["a", svc("a", "198.18.0.1", ["198.19.0.1", "198.19.0.2"])]]));
  assert.deepEqual(kinds(p.txs[0].ops), ["add chain", "flush chain", "add rule", "add rule"]);
  assert.equal(planPartial(w, new Map([["a", svc("a", "198.18.0.1", ["198.19.0.1"])]])).ops, 0);
});

Deno.test("plan: affinity sets come and go with their fragment; timeout change re-creates", () => {
  const w = start(["a", svc("a", "198.18.0.1", ["198.19.0.1"])]);
  const p = planPartial(
    w,
    new Map([["a", svc("a", "198.18.0.1", ["198.19.0.1"], { affinity: 60 })]]),
  );
  assert.deepEqual(kinds(p.txs[0].ops), ["add set", "add chain", "flush chain", "add rule"]);
  commitPlan(w, p, 0);
  const p2 = planPartial(
    w,
    new Map([["a", svc("a", "198.18.0.1", ["198.19.0.1"], { affinity: 90 })]]),
  );
  // Rules referencing the set are flushed before the delete and re-added after the add.
  assert.deepEqual(kinds(p2.txs[0].ops), [
    "add chain",
    "flush chain",
    "delete set",
    "add set",
    "add rule",
  ]);
  commitPlan(w, p2, 0);
  const p3 = planPartial(w, new Map([["a", svc("a", "198.18.0.1", ["198.19.0.1"])]]));
  assert.deepEqual(kinds(p3.txs[0].ops), ["add chain", "flush chain", "add rule", "delete set"]);
});

Deno.test("plan: deleted service flushes its chain now, deletes it later", () => {
  const w = start(["a", svc("a", "198.18.0.1", ["198.19.0.1"])]);
  const p = planPartial(w, new Map([["a", null]]));
  assert.deepEqual(kinds(p.txs[0].ops), ["flush chain", "delete element", "delete element"]);
  commitPlan(w, p, 100);
  assert.deepEqual([...w.staleChains], [["service-a", 100]]);
  assert.equal(planStaleDeletion(w, 1099, 1000), null);
  const d = planStaleDeletion(w, 1100, 1000)!;
  assert.deepEqual(d.chains, ["service-a"]);
  assert.equal(
    renderScript("ip", "kube-proxy", d.tx.ops),
    "delete chain ip kube-proxy service-a\n",
  );
});

Deno.test("plan: full sync after kernel correction repairs only what differs", () => {
  const a = svc("a", "198.18.0.1", ["198.19.0.1"]);
  const b = svc("b", "198.18.0.2", ["198.19.0.2"]);
  const w = start(["a", a], ["b", b]);
  const frags = new Map<string, Fragment>([[BASE_ID, base], ["a", a], ["b", b]]);
  // Kernel: service-b missing, a foreign chain, service-ips lacks b and has a stray element.
  const view = {
    tableExists: true,
    chains: ["services", "service-a", "foreign"],
    elements: new Map([
      ["service-ips", [
        { kind: "element" as const, key: ["198.18.0.1", "tcp", "80"], value: ["goto service-a"] },
        { kind: "element" as const, key: ["198.18.0.9", "tcp", "80"], value: ["goto service-a"] },
      ]],
      ["cluster-ips", [
        { kind: "element" as const, key: ["198.18.0.1"] },
        { kind: "element" as const, key: ["198.18.0.2"] },
      ]],
    ]),
  };
  const p = planFull(w, frags, "k", view);
  const s = script(p);
  assert.match(s, /add chain ip kube-proxy service-b\n/);
  assert.match(s, /flush chain ip kube-proxy foreign/);
  assert.match(s, /delete element ip kube-proxy service-ips \{ 198\.18\.0\.9 \. tcp \. 80 \}/);
  assert.match(s, /add element ip kube-proxy service-ips \{ 198\.18\.0\.2 \. tcp \. 80/);
  assert.doesNotMatch(s, /service-a/, "service-a is intact");
  assert.doesNotMatch(s, /cluster-ips/);
  assert.deepEqual(p.newlyStale, ["foreign"]);
});

Deno.test("plan: adoption rewrites unknown chains in place", () => {
  const w = new WrittenState();
  const a = svc("a", "198.18.0.1", ["198.19.0.1"]);
  const extra = correctFromKernel(w, {
    tableExists: true,
    chains: ["services", "service-a", "service-old"],
    elements: new Map(),
  }, new Set(["services", "service-a"]));
  assert.deepEqual(extra, ["service-old"]);
  assert.equal(w.chains.get("service-a")!.rules, null);
  const p = planFull(w, new Map([[BASE_ID, base], ["a", a]]), "k");
  assert.match(
    script(p),
    /add chain ip kube-proxy service-a\nflush chain ip kube-proxy service-a\n/,
  );
});

Deno.test("plan: planFull needs the base fragment", () => {
  assert.throws(() => planFull(new WrittenState(), new Map(), "k"), /must include the base/);
});

Deno.test("plan: when owners disagree and the written owner leaves, another owner's value is written", () => {
  const claim = (name: string): Fragment => ({
    ...svc(name, `198.18.0.${name === "a" ? 1 : 2}`, ["198.19.0.1"]),
    elements: [{
      target: "service-ips",
      key: ["198.18.9.9", "tcp", "80"],
      value: [`goto service-${name}`],
    }],
  });
  const w = start(["a", claim("a")]);
  const add = planPartial(w, new Map([["b", claim("b")]]));
  assert.match(
    script(add),
    /add element ip kube-proxy service-ips \{ 198\.18\.9\.9 \. tcp \. 80 : goto service-b \}/,
  );
  commitPlan(w, add, 0);
  const rm = planPartial(w, new Map([["b", null]]));
  const s = script(rm);
  assert.match(s, /delete element ip kube-proxy service-ips \{ 198\.18\.9\.9 \. tcp \. 80 \}/);
  assert.match(
    s,
    /add element ip kube-proxy service-ips \{ 198\.18\.9\.9 \. tcp \. 80 : goto service-a \}/,
  );
  commitPlan(w, rm, 0);
  assert.equal(w.elements.get("service-ips\u0000198.18.9.9 . tcp . 80")!.owner, "a");
});
