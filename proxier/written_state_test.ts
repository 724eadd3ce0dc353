import assert from "node:assert/strict";
import type { Fragment } from "./fragment.ts";
import { BASE_ID, indexFragments, sameFragment, WrittenState } from "./written_state.ts";

function frag(name: string, ip: string): Fragment {
  return {
    chains: [{
      chain: { kind: "chain", name: `service-${name}` },
      rules: [`meta l4proto tcp dnat ip to ${ip}:80`],
    }],
    sets: [{
      kind: "set",
      name: `aff-${name}`,
      type: "ipv4_addr",
      flags: ["dynamic", "timeout"],
      timeout: 10,
    }],
    elements: [
      { target: "cluster-ips", key: ["198.18.0.1"], comment: name },
      { target: "service-ips", key: ["198.18.0.1", "tcp", "80"], value: [`goto service-${name}`] },
    ],
  };
}

Deno.test("written state: indexFragments counts owners; last writer's value wins", () => {
  const idx = indexFragments([["a", frag("a", "198.19.0.1")], ["b", frag("b", "198.19.0.2")]]);
  assert.equal(idx.chains.size, 2);
  assert.equal(idx.sets.size, 2);
  const cip = idx.elements.get("cluster-ips\u0000198.18.0.1")!;
  assert.equal(cip.refs, 2);
  const sip = idx.elements.get("service-ips\u0000198.18.0.1 . tcp . 80")!;
  assert.equal(sip.owner, "b");
  assert.deepEqual(sip.spec.value, ["goto service-b"]);
});

Deno.test("written state: sameFragment compares rules, sets and element values", () => {
  assert.ok(sameFragment(frag("a", "198.19.0.1"), frag("a", "198.19.0.1")));
  assert.ok(!sameFragment(frag("a", "198.19.0.1"), frag("a", "198.19.0.2")));
  const other = frag("a", "198.19.0.1");
  other.elements[1] = { ...other.elements[1], value: ["goto reject-chain"] };
  assert.ok(!sameFragment(frag("a", "198.19.0.1"), other));
  const timeout = frag("a", "198.19.0.1");
  timeout.sets[0] = { ...timeout.sets[0], timeout: 20 };
  assert.ok(!sameFragment(frag("a", "198.19.0.1"), timeout));
});

Deno.test("written state: findOwner skips leaving fragments and prefers pending ones", () => {
  const w = new WrittenState();
  w.fragments.set("a", frag("a", "198.19.0.1"));
  w.fragments.set("b", frag("b", "198.19.0.2"));
  const id = "service-ips\u0000198.18.0.1 . tcp . 80";
  assert.equal(w.findOwner(id, new Set(["a"]), new Map())?.owner, "b");
  assert.equal(w.findOwner(id, new Set(["a", "b"]), new Map()), undefined);
  const c = frag("c", "198.19.0.3");
  assert.equal(w.findOwner(id, new Set(["a"]), new Map([["c", c]]))?.owner, "c");
});

Deno.test("written state: empty, elementsOf and clear", () => {
  const w = new WrittenState();
  assert.ok(w.empty);
  const idx = indexFragments([[BASE_ID, frag("a", "198.19.0.1")]]);
  for (const [k, v] of idx.elements) w.elements.set(k, v);
  w.staleChains.set("x", 1);
  assert.ok(!w.empty);
  assert.deepEqual([...w.elementsOf("cluster-ips").keys()], ["cluster-ips\u0000198.18.0.1"]);
  w.clear();
  assert.ok(w.empty);
  assert.equal(w.staleChains.size, 0);
});
