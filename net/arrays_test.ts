import assert from "node:assert/strict";
import { sameKeys, sameStrings } from "./arrays.ts";

Deno.test("sameStrings compares in order and treats two missing lists as equal", () => {
  assert.ok(sameStrings(["a", "b"], ["a", "b"]));
  assert.ok(!sameStrings(["a", "b"], ["b", "a"]));
  assert.ok(!sameStrings(["a"], ["a", "b"]));
  assert.ok(sameStrings([], []));
  assert.ok(sameStrings(undefined, undefined));
  assert.ok(!sameStrings(undefined, []));
});

Deno.test("sameKeys maps each item through the key", () => {
  const items = [{ n: "x" }, { n: "y" }];
  assert.ok(sameKeys(["x", "y"], items, (i) => i.n));
  assert.ok(!sameKeys(["y", "x"], items, (i) => i.n));
  assert.ok(!sameKeys(["x"], items, (i) => i.n));
});
