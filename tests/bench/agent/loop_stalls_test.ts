import assert from "node:assert/strict";
import { stalls } from "./loop_stalls.ts";

const H = "kube_nft_proxy_event_loop_stall_seconds_bucket";

/** A scrape's stall histogram: cumulative counts by bucket bound. */
function scrape(counts: Record<string, number>): Map<string, number> {
  return new Map(Object.entries(counts).map(([le, n]) => [`${H}{le="${le}"}`, n]));
}

Deno.test("stalls counts the ticks between two scrapes, not since start", () => {
  const before = scrape({ "0.01": 90, "0.05": 95, "0.25": 99, "+Inf": 100 });
  // 50 more ticks: 48 under 10 ms, one between 10 and 50 ms, one between 50 and 250 ms.
  const after = scrape({ "0.01": 138, "0.05": 144, "0.25": 149, "+Inf": 150 });
  assert.deepEqual(stalls(before, after), {
    ticks: 50,
    stallsOver50ms: 1,
    longestStallUnderS: "0.25",
  });
});

Deno.test("stalls names the smallest bound every tick stayed under", () => {
  const before = scrape({ "0.01": 10, "0.05": 20, "0.25": 30, "+Inf": 30 });
  const after = scrape({ "0.01": 15, "0.05": 25, "0.25": 35, "+Inf": 35 });
  assert.deepEqual(stalls(before, after), {
    ticks: 5,
    stallsOver50ms: 0,
    longestStallUnderS: "0.01",
  });
});
