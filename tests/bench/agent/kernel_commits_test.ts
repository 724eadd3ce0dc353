import assert from "node:assert/strict";
import type { NftNotification } from "../../../ffi/nftables/netlink/notify.ts";
import { attribute, type Commit, CommitCollector, describeCommit } from "./kernel_commits.ts";

const msg = (kind: NftNotification["kind"], op: "new" | "del", name = ""): NftNotification => ({
  kind,
  op,
  portid: 7,
  family: 2,
  table: "kube-proxy",
  name,
});
const gen = (genId: number): NftNotification => ({ ...msg("gen", "new"), genId });

/** A commit at `t` with `elements` element messages. */
const commit = (t: number, elements: number): Commit => ({
  t,
  genId: t,
  elements,
  added: elements,
  removed: 0,
  objects: 0,
  names: {},
});

Deno.test("CommitCollector: one commit per NEWGEN, a batch split over two receives joined", () => {
  const c = new CommitCollector();
  const first = c.feed([
    msg("element", "new", "endpoints-tcp"),
    msg("element", "del", "frontends-dnat-tcp-5000"),
    msg("element", "new", "frontends-dnat-tcp-5001"),
    gen(10),
    msg("set", "new", "frontends-dnat-tcp-7"),
  ], 100);
  assert.equal(first.length, 1);
  assert.deepEqual({ ...first[0], names: undefined }, {
    t: 100,
    genId: 10,
    elements: 3,
    added: 2,
    removed: 1,
    objects: 0,
    names: undefined,
  });
  assert.equal(
    describeCommit(first[0]),
    "endpoints-tcp:+1-0 frontends-dnat-tcp-5000:+0-1 frontends-dnat-tcp-5001:+1-0",
  );
  const second = c.feed([msg("rule", "new", "service-classes"), gen(11)], 105);
  assert.equal(second.length, 1);
  assert.equal(second[0].objects, 2);
  assert.equal(second[0].elements, 0);
  assert.equal(describeCommit(second[0]), "frontends-dnat-tcp-7:+1-0 rule:service-classes:+1-0");
});

Deno.test("attribute: each change write answered by its own commit; no-change write alone", () => {
  const writes = [
    { t: 0, expectsChange: true },
    { t: 20, expectsChange: true },
    { t: 40, expectsChange: false },
  ];
  const a = attribute(writes, [commit(3, 3), commit(25, 5)], 60);
  assert.deepEqual(a.outcomes.map((o) => o.toKernelMs), [3, 5, undefined]);
  assert.deepEqual(a.outcomes.map((o) => o.elements), [3, 5, 0]);
  assert.deepEqual(a.outcomes.map((o) => o.shared), [false, false, false]);
  assert.equal(a.noChangeCommits, 0);
  assert.equal(a.sharedCommits, 0);
  assert.equal(a.unanswered, 0);
});

Deno.test("attribute: a commit after the next write answers both, marked shared and late", () => {
  const writes = [{ t: 0, expectsChange: true }, { t: 20, expectsChange: true }];
  const a = attribute(writes, [commit(30, 8)], 60);
  assert.deepEqual(a.outcomes.map((o) => o.toKernelMs), [30, 10]);
  assert.deepEqual(a.outcomes.map((o) => o.shared), [true, true]);
  assert.deepEqual(a.outcomes.map((o) => o.late), [true, false]);
  assert.equal(a.outcomes[0].elements, 8);
  assert.equal(a.sharedCommits, 1);
  assert.equal(a.lateCommits, 1);
});

Deno.test("attribute: a late commit after a no-change write is late, not a no-change commit", () => {
  const writes = [{ t: 0, expectsChange: true }, { t: 20, expectsChange: false }];
  const a = attribute(writes, [commit(25, 5)], 60);
  assert.equal(a.outcomes[0].toKernelMs, 25);
  assert.equal(a.outcomes[0].late, true);
  assert.equal(a.outcomes[0].shared, false);
  assert.equal(a.noChangeCommits, 0);
  assert.equal(a.lateCommits, 1);
});

Deno.test("attribute: a commit answers the writes up to the last whose state it reaches", () => {
  const writes = [
    { t: 0, expectsChange: true, state: 2 },
    { t: 20, expectsChange: true, state: 1 },
    { t: 40, expectsChange: false },
    { t: 60, expectsChange: true, state: 2 },
  ];
  const at = (t: number, state: number): Commit => ({ ...commit(t, 3), state });
  // The first write's commit after the second write: late, the second still waits.
  const a = attribute(writes, [at(22, 2), at(45, 1), at(70, 2)], 100);
  assert.deepEqual(a.outcomes.map((o) => o.toKernelMs), [22, 25, undefined, 10]);
  assert.deepEqual(a.outcomes.map((o) => o.late), [true, true, false, false]);
  assert.deepEqual(a.outcomes.map((o) => o.shared), [false, false, false, false]);
  assert.equal(a.noChangeCommits, 0);
  assert.equal(a.lateCommits, 2);
  // The first two batched (state 1) after the fourth was made: the fourth still waits for its
  // own commit, which is then not taken for the no-change write's.
  const b = attribute(writes, [at(65, 1), at(75, 2)], 100);
  assert.deepEqual(b.outcomes.map((o) => o.toKernelMs), [65, 45, undefined, 15]);
  assert.deepEqual(b.outcomes.map((o) => o.shared), [true, true, false, false]);
  assert.equal(b.sharedCommits, 1);
  assert.equal(b.noChangeCommits, 0);
  // A state no waiting write leads to answers nothing.
  const c = attribute(writes.slice(0, 1), [at(5, 7), at(9, 2)], 100);
  assert.equal(c.outcomes[0].toKernelMs, 9);
  assert.equal(c.extraCommits, 1);
});

Deno.test("attribute: a commit without elements waits for the one that carries the change", () => {
  const writes = [{ t: 0, expectsChange: true }];
  const a = attribute(writes, [commit(4, 0), commit(9, 3)], 60);
  assert.equal(a.outcomes[0].toKernelMs, 9);
  assert.equal(a.outcomes[0].commits, 2);
  assert.equal(a.extraCommits, 0);
});

Deno.test("attribute: commits nothing waits for are extra or no-change findings", () => {
  const writes = [
    { t: 0, expectsChange: true },
    { t: 20, expectsChange: false },
    { t: 40, expectsChange: true },
  ];
  const c = { ...commit(23, 2), names: { "endpoints-tcp": [1, 1] as [number, number] } };
  const a = attribute(writes, [commit(-5, 9), commit(2, 3), commit(8, 1), c], 60);
  assert.equal(a.extraCommits, 1);
  assert.equal(a.outcomes[0].elements, 4);
  assert.equal(a.noChangeCommits, 1);
  assert.equal(a.noChangeElements, 2);
  assert.deepEqual(a.noChangeExamples, ["0.023 s: endpoints-tcp:+1-1 (the commit before: )"]);
  assert.equal(a.unanswered, 1);
});

Deno.test("attribute: commits at or after the end are left out", () => {
  const a = attribute([{ t: 0, expectsChange: true }], [commit(70, 3)], 60);
  assert.equal(a.outcomes[0].toKernelMs, undefined);
  assert.equal(a.unanswered, 1);
});
