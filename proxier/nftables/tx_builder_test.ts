import assert from "node:assert/strict";
import { TxBuilder } from "./tx_builder.ts";

const el = (set: string, key: string) => ({ kind: "element" as const, set, key: [key] });

Deno.test("tx builder: new declarations go first, alone, when nothing in place is emptied", () => {
  const tb = new TxBuilder();
  tb.head.set({ kind: "set", name: "frontends-dnat-tcp-1", type: "ipv4_addr" });
  tb.head.chain({ kind: "chain", name: "dnat-tcp-1" }, ["counter"], false);
  tb.head.chain({ kind: "chain", name: "service-classes" }, ["counter"], true);
  tb.tail.del(el("frontends-dnat-tcp-3", "198.19.0.1"));
  tb.tail.add(el("frontends-dnat-tcp-1", "198.19.0.1"));
  const [decls, elements, ...rest] = tb.finish(true);
  assert.equal(rest.length, 0);
  assert.ok(decls.ops.every((o) => o.obj.kind !== "element"));
  assert.deepEqual(elements.ops.map((o) => o.verb), ["delete", "add"]);
});

Deno.test("tx builder: one transaction when a chain is emptied for good or nothing is declared", () => {
  const retire = new TxBuilder();
  retire.tail.flushChain("service-X");
  retire.tail.del(el("service-ips", "198.19.0.1"));
  assert.equal(retire.finish(true).length, 1, "the element leaves with its chain's rules");
  const elementsOnly = new TxBuilder();
  elementsOnly.tail.add(el("cluster-ips", "198.19.0.1"));
  assert.equal(elementsOnly.finish(true).length, 1);
  const whole = new TxBuilder();
  whole.head.set({ kind: "set", name: "s", type: "ipv4_addr" });
  whole.tail.add(el("s", "198.19.0.1"));
  assert.equal(whole.finish().length, 1, "not asked to split");
});
