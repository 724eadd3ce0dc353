import assert from "node:assert/strict";
import { newerWins, NO_TARGET, targetId } from "./endpoint_dedup.ts";

Deno.test("targetId: the uid when there is one, else kind/namespace/name; none is NO_TARGET", () => {
  assert.equal(targetId(undefined), NO_TARGET);
  assert.equal(targetId(null), NO_TARGET);
  assert.equal(targetId({}), NO_TARGET);
  const a = targetId({ uid: "u-1", name: "p" });
  assert.equal(a, targetId({ uid: "u-1", name: "renamed" }), "the uid decides");
  assert.notEqual(a, targetId({ uid: "u-2", name: "p" }));
  const byName = targetId({ kind: "Pod", namespace: "ns", name: "p" });
  assert.notEqual(byName, NO_TARGET);
  assert.equal(byName, targetId({ kind: "Pod", namespace: "ns", name: "p" }));
  assert.notEqual(byName, targetId({ kind: "Pod", namespace: "ns", name: "q" }));
  for (const t of [a, byName]) assert.ok(Number.isInteger(t) && t > 0 && t < 2 ** 31);
});

Deno.test("newerWins: same Pod takes the newer copy; different Pods prefer the live one; ties go newer", () => {
  const live = { terminating: false }, ghost = { terminating: true };
  // The same Pod moving between slices: the newer conditions, even when they say terminating.
  assert.equal(newerWins(live, 7, ghost, 7), true);
  assert.equal(newerWins(ghost, 7, live, 7), true);
  // Different Pods (or no targetRef): a terminating copy never displaces a live one.
  assert.equal(newerWins(live, 7, ghost, 8), false);
  assert.equal(newerWins(ghost, 7, live, 8), true);
  assert.equal(newerWins(live, NO_TARGET, ghost, NO_TARGET), false);
  // Ties: the newer copy.
  assert.equal(newerWins(live, 7, live, 8), true);
  assert.equal(newerWins(ghost, 7, ghost, 8), true);
});
