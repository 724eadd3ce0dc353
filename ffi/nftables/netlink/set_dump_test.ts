import assert from "node:assert/strict";
import { hazardousSets } from "./set_dump.ts";

const hex = (s: string) => new Uint8Array(s.match(/../g)!.map((b) => parseInt(b, 16)));

Deno.test("hazardousSets: each set is judged by its userdata, the same verdict on every screen", () => {
  const bad = hex("0004010000000310"); // an attribute running past the end
  const sets = [
    {
      family: "ip",
      table: "kube-proxy",
      name: "ours",
      userdata: hex("000401000000030e00040a0000000106000401000000"),
    },
    { family: "ip6", table: "other", name: "broken", userdata: bad },
    { family: "ip", table: "other", name: "plain" },
    { family: "inet", table: "other", name: "broken-too", userdata: bad.slice() },
  ];
  for (let i = 0; i < 2; i++) {
    const found = hazardousSets(sets);
    assert.deepEqual(found.map((s) => `${s.family} ${s.table} ${s.name}`), [
      "ip6 other broken",
      "inet other broken-too",
    ]);
    assert.match(found[0].why, /past the end/);
  }
});
