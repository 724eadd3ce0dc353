/**
 * Quiet windows against the real kernel: around a large element batch of ours the monitor leaves
 * the notification group (the kernel then builds no message per element), and generation ids
 * account for what it did not see. Runs tests/e2e/fixtures/quiet_writes.ts in a fresh namespace.
 *
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot, withNetns } from "../netns.ts";

const fixture = `${repoRoot}/tests/e2e/fixtures/quiet_writes.ts`;

e2eTest(
  "quiet writes: a large batch of ours is not reported, a neighbour's commit during it is",
  async () => {
    await withNetns(1, async (ns) => {
      const res = await ns.exec([denoBin, "run", "-A", fixture, "20000"], { check: false });
      if (res.code !== 0) throw new Error(`fixture failed (${res.code}):\n${res.stderr}`);
      const out = JSON.parse(res.stdout.trim().split("\n").at(-1)!);
      console.log(
        `20000 elements: ${out.quiet.ms.toFixed(0)} ms paused, ${
          out.loud.ms.toFixed(0)
        } ms with a listener`,
      );
      // Ours, paused: one window, one commit, and nothing reported.
      assert.equal(out.quiet.windows, 1);
      assert.equal(out.quiet.commits, 1);
      assert.deepEqual(out.quiet.foreign, []);
      assert.deepEqual(out.quiet.unseen, []);
      // A neighbour's commit inside the window: no notification reached us, the gap says so.
      assert.equal(out.foreignInWindow.windows, 1);
      assert.equal(out.foreignInWindow.commits, 2);
      assert.equal(out.foreignInWindow.unseen.length, 1, JSON.stringify(out.foreignInWindow));
      assert.match(out.foreignInWindow.unseen[0], /1 commit\(s\) by another program/);
      // A small batch is not paused; the subscription is back for a neighbour's later commit.
      assert.equal(out.small.windows, 0);
      assert.deepEqual(out.small.unseen, []);
      assert.ok(
        out.foreignAfter.includes("table knp-neighbour2"),
        JSON.stringify(out.foreignAfter),
      );
      // Without the pause, the monitor's own notifications are still dropped by its filter.
      assert.deepEqual(out.loud.foreign, []);
      assert.deepEqual(out.loud.unseen, []);
    });
  },
);
