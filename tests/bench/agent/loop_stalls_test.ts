import assert from "node:assert/strict";
import { stalls } from "./loop_stalls.ts";

const H = "kube_nft_proxy_event_loop_stall_seconds_bucket";

/** A scrape's stall histogram: cumulative counts by bucket bound (0.01, 0.05, 0.25, +Inf). */
function scrape(...counts: number[]): Map<string, number> {
  const les = ["0.01", "0.05", "0.25", "+Inf"];
  return new Map(counts.map((n, i) => [`${H}{le="${les[i]}"}`, n]));
}

const CASES = [
  {
    what: "counts the ticks between two scrapes, not since start",
    // 50 more ticks: 48 under 10 ms, one between 10 and 50 ms, one between 50 and 250 ms.
    before: scrape(90, 95, 99, 100),
    after: scrape(138, 144, 149, 150),
    want: { ticks: 50, stallsOver50ms: 1, longestStallUnderS: "0.25" },
  },
  {
    what: "names the smallest bound every tick stayed under",
    before: scrape(10, 20, 30, 30),
    after: scrape(15, 25, 35, 35),
    want: { ticks: 5, stallsOver50ms: 0, longestStallUnderS: "0.01" },
  },
];

for (const c of CASES) {
  Deno.test(`stalls ${c.what}`, () => assert.deepEqual(stalls(c.before, c.after), c.want));
}
