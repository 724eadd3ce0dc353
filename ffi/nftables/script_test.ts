import assert from "node:assert/strict";
import { quote, renderElement, renderOperation, renderScript } from "./script.ts";
import type { NftObject, Operation, Verb } from "./types.ts";
import { Transaction } from "./types.ts";

const op = (verb: Verb, obj: NftObject): Operation => ({ verb, obj });
const r = (o: Operation) => renderOperation("ip", "kube-proxy", o);

Deno.test("quote: escapes backslashes and double quotes", () => {
  assert.equal(quote("plain"), '"plain"');
  assert.equal(quote('a "b" \\c'), '"a \\"b\\" \\\\c"');
});

Deno.test("renderOperation: tables", () => {
  assert.equal(r(op("add", { kind: "table" })), "add table ip kube-proxy");
  assert.equal(
    r(op("create", { kind: "table", comment: "rules for kube-proxy" })),
    'create table ip kube-proxy { comment "rules for kube-proxy" ; }',
  );
  assert.equal(r(op("flush", { kind: "table" })), "flush table ip kube-proxy");
  assert.equal(r(op("delete", { kind: "table", comment: "x" })), "delete table ip kube-proxy");
});

Deno.test("renderOperation: base and regular chains", () => {
  assert.equal(
    r(op("add", {
      kind: "chain",
      name: "nat-prerouting",
      type: "nat",
      hook: "prerouting",
      priority: -100,
      policy: "accept",
    })),
    "add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; policy accept ; }",
  );
  assert.equal(
    r(op("add", { kind: "chain", name: "f", type: "filter", hook: "input" })),
    "add chain ip kube-proxy f { type filter hook input priority 0 ; }",
  );
  assert.equal(
    r(op("add", { kind: "chain", name: "services" })),
    "add chain ip kube-proxy services",
  );
  assert.equal(
    r(op("create", { kind: "chain", name: "s", comment: "ns/svc" })),
    'create chain ip kube-proxy s { comment "ns/svc" ; }',
  );
  // A hook without a type is not a base chain: only the comment is rendered.
  assert.equal(
    r(op("add", { kind: "chain", name: "h", hook: "input" })),
    "add chain ip kube-proxy h",
  );
  assert.equal(r(op("flush", { kind: "chain", name: "s" })), "flush chain ip kube-proxy s");
  assert.equal(r(op("delete", { kind: "chain", name: "s" })), "delete chain ip kube-proxy s");
});

Deno.test("renderOperation: sets and maps with flags, timeout and comment", () => {
  assert.equal(
    r(op("add", {
      kind: "set",
      name: "affinity",
      type: "ipv4_addr",
      flags: ["dynamic", "timeout"],
      timeout: 10800,
      comment: "c",
    })),
    'add set ip kube-proxy affinity { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; comment "c" ; }',
  );
  assert.equal(
    r(op("add", { kind: "set", name: "s", type: "ipv4_addr", flags: [] })),
    "add set ip kube-proxy s { type ipv4_addr ; }",
  );
  assert.equal(
    r(op("add", {
      kind: "map",
      name: "service-ips",
      type: "ipv4_addr . inet_proto . inet_service",
      dataType: "verdict",
    })),
    "add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }",
  );
  assert.equal(
    r(op("flush", { kind: "map", name: "m", type: "x", dataType: "y" })),
    "flush map ip kube-proxy m",
  );
  assert.equal(
    r(op("delete", { kind: "set", name: "s", type: "x" })),
    "delete set ip kube-proxy s",
  );
});

Deno.test("renderOperation: elements, with value only when adding", () => {
  const el: NftObject = {
    kind: "element",
    map: "service-ips",
    key: ["198.18.0.1", "tcp", "80"],
    value: ["goto service-X"],
    comment: "ns/svc:p80",
  };
  assert.equal(
    r(op("add", el)),
    'add element ip kube-proxy service-ips { 198.18.0.1 . tcp . 80 comment "ns/svc:p80" : goto service-X }',
  );
  assert.equal(
    r(op("create", el)),
    'create element ip kube-proxy service-ips { 198.18.0.1 . tcp . 80 comment "ns/svc:p80" : goto service-X }',
  );
  assert.equal(
    r(op("delete", el)),
    'delete element ip kube-proxy service-ips { 198.18.0.1 . tcp . 80 comment "ns/svc:p80" }',
  );
  assert.equal(
    renderElement({ kind: "element", set: "s", key: ["198.18.0.1"], value: ["x"] }, false),
    "198.18.0.1",
  );
  assert.throws(
    () => r(op("add", { kind: "element", key: ["1"] })),
    /element needs a set or map name/,
  );
});

Deno.test("renderOperation: rules, positions, handles", () => {
  const rule = { kind: "rule" as const, chain: "c", rule: "ip daddr 198.18.0.1 drop" };
  assert.equal(r(op("add", rule)), "add rule ip kube-proxy c ip daddr 198.18.0.1 drop");
  assert.equal(
    r(op("add", { ...rule, comment: 'say "hi"' })),
    'add rule ip kube-proxy c ip daddr 198.18.0.1 drop comment "say \\"hi\\""',
  );
  assert.equal(
    r(op("add", { ...rule, position: 4 })),
    "add rule ip kube-proxy c position 4 ip daddr 198.18.0.1 drop",
  );
  assert.equal(r(op("insert", rule)), "insert rule ip kube-proxy c ip daddr 198.18.0.1 drop");
  assert.equal(
    r(op("insert", { ...rule, position: 2 })),
    "insert rule ip kube-proxy c position 2 ip daddr 198.18.0.1 drop",
  );
  assert.equal(
    r(op("replace", { ...rule, handle: 7 })),
    "replace rule ip kube-proxy c handle 7 ip daddr 198.18.0.1 drop",
  );
  assert.equal(r(op("delete", { ...rule, handle: 7 })), "delete rule ip kube-proxy c handle 7");
  assert.throws(() => r(op("replace", rule)), /needs a handle/);
  assert.throws(() => r(op("delete", rule)), /needs a handle/);
  assert.throws(() => r(op("flush", rule)), /cannot flush a rule/);
});

Deno.test("renderScript: one command per line, element runs folded per set and verb", () => {
  const tx = new Transaction()
    .add({ kind: "table" })
    .add({ kind: "element", set: "s", key: ["198.18.0.1"] })
    .add({ kind: "element", set: "s", key: ["198.18.0.2"], comment: "b" })
    .add({ kind: "element", set: "t", key: ["198.18.0.3"] })
    .delete({ kind: "element", set: "t", key: ["198.18.0.4"] })
    .delete({ kind: "element", set: "t", key: ["198.18.0.5"] })
    .create({ kind: "element", set: "t", key: ["198.18.0.6"] })
    .add({ kind: "rule", chain: "c", rule: "accept" });
  assert.equal(
    renderScript("ip6", "kp", tx.ops),
    [
      "add table ip6 kp",
      'add element ip6 kp s { 198.18.0.1, 198.18.0.2 comment "b" }',
      "add element ip6 kp t { 198.18.0.3 }",
      "delete element ip6 kp t { 198.18.0.4, 198.18.0.5 }",
      "create element ip6 kp t { 198.18.0.6 }",
      "add rule ip6 kp c accept",
      "",
    ].join("\n"),
  );
  assert.equal(renderScript("ip", "kp", []), "\n");
});
