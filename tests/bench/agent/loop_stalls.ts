/**
 * The agent's event-loop stalls between two scrapes of its metrics (the stall probe's histogram,
 * agent/loop_stall.ts). The idle phase reports them over its rest, the big Deployment
 * over its rolling update: whether the agent's own loop was held up while a change waited.
 *
 * @module
 */

/** A bucket of the stall histogram, as `samples` keys it; its bound captured. */
const BUCKET = /^kube_nft_proxy_event_loop_stall_seconds_bucket\{le="([^"]+)"\}$/;

/** Stall histogram buckets (le -> cumulative count). */
function buckets(m: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of m) {
    const b = BUCKET.exec(k);
    if (b) out.set(b[1], v);
  }
  return out;
}

/** Ticks over 50 ms late between two scrapes, and the smallest bound all ticks stayed under. */
export function stalls(
  before: Map<string, number>,
  after: Map<string, number>,
): { ticks: number; stallsOver50ms: number; longestStallUnderS: string } {
  const b0 = buckets(before), b1 = buckets(after);
  const d = (le: string) => (b1.get(le) ?? 0) - (b0.get(le) ?? 0);
  const total = d("+Inf");
  const over50 = total - d("0.05");
  let under = "+Inf";
  for (const le of [...b1.keys()].filter((k) => k !== "+Inf").sort((a, b) => +a - +b)) {
    if (d(le) === total) {
      under = le;
      break;
    }
  }
  return { ticks: total, stallsOver50ms: over50, longestStallUnderS: under };
}
