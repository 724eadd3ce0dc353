import assert from "node:assert/strict";
import { decodeFrontend, encodeFrontend, stableBuckets } from "./frontend.ts";
import { BIG_FRONTEND } from "./names.ts";

Deno.test("stableBuckets: endpoints keep their buckets; new ones fill holes; the tail fills gaps", () => {
  const abc = ["a", "b", "c", "d", "e"];
  // Nothing written, or nothing wanted: as given.
  assert.deepEqual(stableBuckets([], ["c", "a"]), ["c", "a"]);
  assert.deepEqual(stableBuckets(abc, []), []);
  // Same set in another order: the written order stays.
  assert.deepEqual(stableBuckets(abc, ["e", "d", "c", "b", "a"]), abc);
  // One replaced in the middle: only its bucket changes.
  assert.deepEqual(stableBuckets(abc, ["a", "b", "d", "e", "x"]), ["a", "b", "x", "d", "e"]);
  // One removed from the middle: the last moves into its bucket, nothing else moves.
  assert.deepEqual(stableBuckets(abc, ["a", "b", "d", "e"]), ["a", "b", "e", "d"]);
  // Two removed, one added.
  assert.deepEqual(stableBuckets(abc, ["b", "c", "e", "y"]), ["y", "b", "c", "e"]);
  // Grown: appended.
  assert.deepEqual(stableBuckets(["a", "b"], ["a", "b", "c", "d"]), ["a", "b", "c", "d"]);
  // A duplicate in what is wanted: left as given.
  assert.deepEqual(stableBuckets(abc, ["a", "a"]), ["a", "a"]);
});

Deno.test("stableBuckets: a rolling update of 5000 endpoints changes one bucket per replaced pod", () => {
  const eps = Array.from({ length: 5000 }, (_, i) => `198.18.${i >> 8}.${i & 255} . 8080`);
  let written: readonly string[] = eps;
  for (let step = 0; step < 20; step++) {
    const next = written.filter((_, i) => i !== step * 97).concat(`198.19.9.${step} . 8080`);
    const placed = stableBuckets(written, [...next].sort());
    const moved = placed.filter((v, i) => v !== written[i]).length;
    assert.equal(moved, 1, `step ${step}`);
    assert.deepEqual([...placed].sort(), [...next].sort());
    written = placed;
  }
});

Deno.test("encodeFrontend keeps a big frontend's buckets for its own encoding only", () => {
  const big = Array.from({ length: BIG_FRONTEND }, (_, i) => `198.18.1.${i} . 80`);
  const spec = encodeFrontend({ verdict: "goto dnat-tcp-9", buckets: big }, "k");
  const back = decodeFrontend(spec, "k");
  assert.equal(back.buckets, big, "the kept array, not a split");
  assert.equal(back.verdict, "goto dnat-tcp-9");
  // Another encoding under the same key (or a copy of the text) decodes from the text.
  const other = encodeFrontend({ buckets: big.slice(1) });
  assert.deepEqual(decodeFrontend(other, "k").buckets, big.slice(1));
  assert.deepEqual(decodeFrontend(spec).buckets, big);
  assert.notEqual(decodeFrontend(spec).buckets, big);
  // Small frontends are not kept.
  const small = ["198.18.2.1 . 80"];
  const s2 = encodeFrontend({ buckets: small }, "s");
  assert.notEqual(decodeFrontend(s2, "s").buckets, small);
  assert.deepEqual(decodeFrontend(s2, "s").buckets, small);
});
