import assert from "node:assert/strict";
import {
  formatGoDuration,
  formatNftDuration,
  parseGoDuration,
  parseNftDuration,
} from "./duration.ts";

Deno.test("Go durations", () => {
  assert.equal(parseGoDuration("0"), 0);
  assert.equal(parseGoDuration("1s"), 1000);
  assert.equal(parseGoDuration("500ms"), 500);
  assert.equal(parseGoDuration("1h30m"), 5_400_000);
  assert.equal(parseGoDuration("1.5h"), 5_400_000);
  assert.equal(parseGoDuration("2m3.5s"), 123_500);
  assert.equal(parseGoDuration("100us"), 0.1);
  assert.equal(parseGoDuration("-1s"), -1000);
  for (const bad of ["", "1", "s", "1d", "1 s", "1s2", "--1s"]) {
    assert.throws(() => parseGoDuration(bad), /Go syntax/, bad);
  }
  assert.equal(formatGoDuration(5_400_000), "1h30m0s");
  assert.equal(formatGoDuration(500), "500ms");
  assert.equal(formatGoDuration(30_000), "30s");
  assert.equal(formatGoDuration(0), "0s");
});

Deno.test("parseNftDuration: nft durations to seconds", () => {
  assert.equal(parseNftDuration("30s"), 30);
  assert.equal(parseNftDuration("1h30m"), 5400);
  assert.equal(parseNftDuration("3h"), 10800);
  assert.equal(parseNftDuration("2d1s"), 172801);
  assert.equal(parseNftDuration("9s990ms"), 9.99);
  assert.throws(() => parseNftDuration("ten"), /cannot parse duration "ten"/);
  assert.throws(() => parseNftDuration("10x"), /cannot parse duration "10x"/);
});

Deno.test("formatNftDuration prints nft-style durations", () => {
  assert.deepEqual([0, 59, 60, 90, 3600, 10800, 86400 + 61].map(formatNftDuration), [
    "0s",
    "59s",
    "1m",
    "1m30s",
    "1h",
    "3h",
    "1d1m1s",
  ]);
});
