import assert from "node:assert/strict";
import type { EndpointInfo, ProxierConfig, ProxyState, ServicePortInfo } from "./model.ts";
import { assemble, toElement } from "./assemble.ts";
import { buildRuleset } from "./rules.ts";
import { servicePort } from "./model_testing.ts";

const svc = (id: string, clusterIP: string, o: Partial<ServicePortInfo> = {}) =>
  servicePort(id, { family: 4, clusterIP, ...o });
const ep = (ip: string): EndpointInfo => ({
  ip,
  port: 80,
  ready: true,
  serving: true,
  terminating: false,
  isLocal: false,
});
const CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "None" },
  nodePortAddresses: [],
};

function built(order: ServicePortInfo[]) {
  const st: ProxyState = {
    family: 4,
    services: new Map(order.map((s) => [s.id, s])),
    endpoints: new Map(order.map((s) => [s.id, [ep("198.18.1.1"), ep("198.18.1.2")]])),
    node: { name: "n", labels: {}, ips: ["198.18.0.1"], podCIDRs: [] },
    serviceCIDRs: ["198.19.0.0/16"],
  };
  return buildRuleset(st, CFG);
}

const A = svc("ns/a:http", "198.19.0.1", { stickyMaxAgeSeconds: 60 });
const A2 = svc("ns/a:https", "198.19.0.1", { port: 443 });
const B = svc("ns/b:http", "198.19.0.2");

Deno.test("assemble: table, flush, chains, sets, rules, elements in dependency order", () => {
  const tx = assemble(built([A, A2, B]));
  const kinds = tx.ops.map((o) => `${o.verb} ${o.obj.kind}`);
  assert.deepEqual(kinds.slice(0, 4), ["add table", "flush table", "add chain", "delete chain"]);
  // Every base chain is deleted once and then re-added with its hook.
  const deleted = tx.ops.filter((o) => o.verb === "delete").map((o) =>
    o.obj.kind === "chain" && o.obj.name
  );
  assert.equal(deleted.length, 8);
  for (const name of deleted) {
    const readd = tx.ops.findLastIndex((o) => o.obj.kind === "chain" && o.obj.name === name);
    const op = tx.ops[readd].obj;
    assert.ok(op.kind === "chain" && op.hook !== undefined, String(name));
  }
  const firstOf = (k: string) => kinds.indexOf(k);
  const lastOf = (k: string) => kinds.lastIndexOf(k);
  assert.ok(lastOf("add chain") < firstOf("add map"));
  assert.ok(lastOf("add set") < firstOf("add rule"));
  assert.ok(lastOf("add rule") < firstOf("add element"));
  assert.equal(tx.ops[0].obj.kind === "table" && tx.ops[0].obj.comment, "rules for kube-proxy");
});

Deno.test("assemble: shared elements (one ClusterIP, two ports; shared endpoints) appear once", () => {
  const tx = assemble(built([A, A2, B]));
  const els = tx.ops.filter((o) => o.obj.kind === "element").map((o) => o.obj);
  const keys = (set: string) =>
    els.filter((e) => e.kind === "element" && (e.set ?? e.map) === set).map((e) =>
      e.kind === "element" ? e.key.join(" . ") : ""
    );
  assert.deepEqual(keys("cluster-ips"), ["198.19.0.1", "198.19.0.2"]);
  assert.deepEqual(keys("hairpin"), ["198.18.1.1 . 198.18.1.1", "198.18.1.2 . 198.18.1.2"]);
  assert.equal(keys("service-ips").length, 3);
  // Affinity sets of A are declared.
  const sets = tx.ops.filter((o) => o.obj.kind === "set").map((o) =>
    o.obj.kind === "set" && o.obj.name
  );
  assert.equal(sets.filter((n) => typeof n === "string" && n.startsWith("affinity-")).length, 2);
});

Deno.test("assemble: output does not depend on service insertion order", () => {
  assert.deepEqual(assemble(built([A, A2, B])).ops, assemble(built([B, A2, A])).ops);
});

Deno.test("toElement: maps vs sets, unknown target is an error", () => {
  const kinds = new Map<string, "set" | "map">([["m", "map"], ["s", "set"]]);
  assert.deepEqual(toElement({ target: "m", key: ["a"], value: ["drop"] }, kinds), {
    kind: "element",
    map: "m",
    key: ["a"],
    value: ["drop"],
  });
  assert.deepEqual(toElement({ target: "s", key: ["a"], comment: "c" }, kinds), {
    kind: "element",
    set: "s",
    key: ["a"],
    comment: "c",
  });
  assert.throws(() => toElement({ target: "x", key: ["a"] }, kinds), /unknown set or map "x"/);
});
