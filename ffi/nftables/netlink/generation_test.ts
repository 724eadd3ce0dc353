import assert from "node:assert/strict";
import { foreignCommits, QuietWindow } from "./generation.ts";

/** A fake kernel: a generation id, the subscription, and what the window reported. */
function fake(start = 10) {
  const k = {
    gen: start,
    subscribed: true,
    unseen: [] as string[],
    failRead: false,
    log: [] as string[],
  };
  const w = new QuietWindow({
    readGeneration: () => {
      if (k.failRead) throw new Error("EPERM");
      return k.gen;
    },
    subscribe: (on) => {
      k.log.push(on ? "join" : "leave");
      k.subscribed = on;
      return true;
    },
    onUnseen: (why) => k.unseen.push(why),
  });
  return { k, w };
}

Deno.test("quiet window: our own commits in the window report nothing", () => {
  const { k, w } = fake();
  w.begin();
  assert.equal(k.subscribed, false);
  k.gen++; // our batch's commit
  w.end([11]);
  assert.equal(k.subscribed, true);
  assert.deepEqual(k.unseen, []);
});

Deno.test("quiet window: a commit that is not ours is reported once, at the end", () => {
  const { k, w } = fake();
  w.begin();
  k.gen += 2; // a neighbour's commit, then ours
  w.end([12]);
  assert.equal(k.unseen.length, 1);
  assert.match(k.unseen[0], /^1 commit\(s\) by another program/);
});

Deno.test("quiet window: nested windows leave and rejoin once, and pool their commits", () => {
  const { k, w } = fake();
  w.begin();
  w.begin();
  k.gen += 2;
  w.end([11]);
  assert.equal(k.subscribed, false, "still inside the outer window");
  w.end([12]);
  assert.deepEqual(k.log, ["leave", "join"]);
  assert.deepEqual(k.unseen, []);
});

Deno.test("quiet window: a failed batch (no id) with a foreign commit is reported", () => {
  const { k, w } = fake();
  w.begin();
  k.gen++;
  w.end([]);
  assert.equal(k.unseen.length, 1);
});

Deno.test("quiet window: without a generation id it stays subscribed and reports nothing", () => {
  const { k, w } = fake();
  k.failRead = true;
  w.begin();
  assert.equal(k.subscribed, true);
  w.end([]);
  assert.deepEqual(k.log, []);
  assert.deepEqual(k.unseen, []);
});

Deno.test("quiet window: an id that cannot be read after the window is reported", () => {
  const { k, w } = fake();
  w.begin();
  k.failRead = true;
  w.end([11]);
  assert.equal(k.subscribed, true);
  assert.match(k.unseen[0], /reading the ruleset generation failed/);
});

Deno.test("foreignCommits: ids wrap at 2^32", () => {
  assert.equal(foreignCommits(0xffffffff, 1, new Set([0, 1])), 0);
  assert.equal(foreignCommits(0xffffffff, 1, new Set([1])), 1);
  assert.equal(foreignCommits(5, 5, new Set()), 0);
});
