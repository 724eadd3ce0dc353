import assert from "node:assert/strict";
import FakeTimers from "@sinonjs/fake-timers";
import { BoundedFrequencyRunner } from "./runner.ts";

function setup(
  opts: { min: number; max: number; burst?: number; fail?: () => boolean; work?: number },
) {
  const clock = FakeTimers.withGlobal(globalThis).install({
    toFake: ["setTimeout", "clearTimeout", "Date"],
    now: 1_000_000,
  });
  const runs: number[] = [];
  const errors: number[] = [];
  let active = 0;
  let maxActive = 0;
  const r = new BoundedFrequencyRunner(async () => {
    active++;
    maxActive = Math.max(maxActive, active);
    runs.push(Date.now() - 1_000_000);
    if (opts.work) await new Promise((res) => setTimeout(res, opts.work));
    active--;
    if (opts.fail?.()) throw new Error("boom");
  }, {
    minInterval: opts.min,
    maxInterval: opts.max,
    burst: opts.burst,
    onError: (_e, n) => errors.push(n),
  });
  return { clock, r, runs, errors, maxActive: () => maxActive };
}

Deno.test("runner: start runs once at once, then every maxInterval", async () => {
  const { clock, r, runs } = setup({ min: 1000, max: 30_000 });
  try {
    r.start();
    await clock.tickAsync(0);
    assert.deepEqual(runs, [0]);
    await clock.tickAsync(30_000);
    assert.deepEqual(runs, [0, 30_000]);
    await clock.tickAsync(30_000);
    assert.deepEqual(runs, [0, 30_000, 60_000]);
  } finally {
    void r.stop();
    clock.uninstall();
  }
});

Deno.test("runner: burst of 2, then at most one run per minInterval", async () => {
  const { clock, r, runs } = setup({ min: 1000, max: 60_000, burst: 2 });
  try {
    r.start();
    await clock.tickAsync(0); // run 1 (token 2 -> 1)
    r.run();
    await clock.tickAsync(0); // run 2 (burst)
    r.run();
    await clock.tickAsync(0);
    assert.deepEqual(runs, [0, 0], "third request must wait for a token");
    await clock.tickAsync(1000);
    assert.deepEqual(runs, [0, 0, 1000]);
    // Many requests inside one interval coalesce into one run.
    for (let i = 0; i < 10; i++) r.run();
    await clock.tickAsync(999);
    assert.equal(runs.length, 3);
    await clock.tickAsync(1);
    assert.deepEqual(runs, [0, 0, 1000, 2000]);
    await clock.tickAsync(5000);
    assert.equal(runs.length, 4, "no runs without requests before maxInterval");
  } finally {
    void r.stop();
    clock.uninstall();
  }
});

Deno.test("runner: never two runs at once; a request during a run runs after it", async () => {
  const { clock, r, runs, maxActive } = setup({ min: 0, max: 60_000, work: 500 });
  try {
    r.start();
    await clock.tickAsync(100);
    r.run();
    r.run();
    await clock.tickAsync(100);
    assert.equal(runs.length, 1);
    await clock.tickAsync(401);
    // The follow-up run starts right after the first ends (+1 ms: a 0 ms timer).
    assert.equal(runs.length, 2);
    assert.ok(runs[1] >= 500 && runs[1] <= 501, `second run at ${runs[1]}`);
    await clock.tickAsync(600);
    assert.equal(runs.length, 2);
    assert.equal(maxActive(), 1);
  } finally {
    void r.stop();
    clock.uninstall();
  }
});

Deno.test("runner: failures retry with exponential backoff capped at maxInterval", async () => {
  let failuresLeft = 4;
  const { clock, r, runs, errors } = setup({
    min: 1000,
    max: 5000,
    fail: () => failuresLeft-- > 0,
  });
  try {
    r.start();
    await clock.tickAsync(0);
    await clock.tickAsync(1000); // retry 1 after 1 s
    await clock.tickAsync(2000); // retry 2 after 2 s
    await clock.tickAsync(4000); // retry 3 after 4 s
    await clock.tickAsync(5000); // retry 4 after min(8 s, 5 s)
    assert.deepEqual(runs, [0, 1000, 3000, 7000, 12000]);
    assert.deepEqual(errors, [1, 2, 3, 4]);
    assert.equal(r.consecutiveFailures, 0);
    await clock.tickAsync(5000);
    assert.deepEqual(runs.at(-1), 17000, "back to the periodic schedule after success");
  } finally {
    void r.stop();
    clock.uninstall();
  }
});

Deno.test("runner: runAfter requests a delayed run; stop cancels everything", async () => {
  const { clock, r, runs } = setup({ min: 100, max: 60_000 });
  try {
    r.start();
    await clock.tickAsync(0);
    r.runAfter(1500);
    await clock.tickAsync(1499);
    assert.equal(runs.length, 1);
    await clock.tickAsync(2);
    assert.equal(runs.length, 2);
    assert.ok(runs[1] >= 1500 && runs[1] <= 1501, `deferred run at ${runs[1]}`);
    r.runAfter(100);
    await r.stop();
    await clock.tickAsync(120_000);
    assert.equal(runs.length, 2);
  } finally {
    clock.uninstall();
  }
});

Deno.test("runner: runAfter keeps the earliest delayed request only", async () => {
  const { clock, r, runs } = setup({ min: 0, max: 60_000 });
  try {
    r.start();
    await clock.tickAsync(0);
    // Every sync of a busy agent asks for the same follow-up: one run, not one per request.
    for (let i = 0; i < 50; i++) {
      r.runAfter(1000);
      await clock.tickAsync(10);
    }
    r.runAfter(2000); // later than the one kept: that run asks again if still due
    await clock.tickAsync(600);
    assert.equal(runs.length, 2, `runs at ${runs}`);
    assert.ok(runs[1] >= 1000 && runs[1] <= 1001, `deferred run at ${runs[1]}`);
    r.runAfter(500);
    r.runAfter(100); // earlier: replaces it
    await clock.tickAsync(1000);
    assert.equal(runs.length, 3, `runs at ${runs}`);
    assert.ok(runs[2] >= 1200 && runs[2] <= 1201, `deferred run at ${runs[2]}`);
  } finally {
    await r.stop();
    clock.uninstall();
  }
});

Deno.test("runner: rejects nonsense intervals with a clear message", () => {
  assert.throws(
    () => new BoundedFrequencyRunner(() => Promise.resolve(), { minInterval: 5, maxInterval: 1 }),
    /minInterval \(5 ms\) exceeds maxInterval \(1 ms\)/,
  );
  assert.throws(
    () => new BoundedFrequencyRunner(() => Promise.resolve(), { minInterval: -1, maxInterval: 1 }),
    /minInterval must be >= 0/,
  );
});

Deno.test("runner: a request with a free token runs without waiting for a timer", async () => {
  const { clock, r, runs } = setup({ min: 0, max: 30_000 });
  try {
    r.start();
    await clock.tickAsync(0);
    assert.deepEqual(runs, [0]);
    r.run();
    r.run(); // requests before the run starts share it
    // Microtasks only: no timer is advanced.
    for (let i = 0; i < 5; i++) await Promise.resolve();
    assert.deepEqual(runs, [0, 0]);
    await r.stop();
    r.run();
    for (let i = 0; i < 5; i++) await Promise.resolve();
    assert.deepEqual(runs, [0, 0], "nothing runs after stop");
  } finally {
    clock.uninstall();
  }
});
