/**
 * The agent's metrics as samples, and its event-loop stalls between two scrapes (the stall probe's
 * histogram, agent/loop_stall.ts). The idle phase reports them over its rest, the big Deployment
 * over its rolling update: whether the agent's own loop was held up while a change waited.
 *
 * @module
 */

/** Sample values of the agent's metrics, by `name{labels}` as printed. */
export async function samples(url: string, timeoutMs = 30_000): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const text = await (await fetch(url, { signal: AbortSignal.timeout(timeoutMs) })).text();
  for (const line of text.split("\n")) {
    if (line.startsWith("#") || line === "") continue;
    const sp = line.lastIndexOf(" ");
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}

const STALL = "kube_nft_proxy_event_loop_stall_seconds";

/** Stall histogram buckets (le -> cumulative count). */
function buckets(m: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [k, v] of m) {
    const b = new RegExp(`^${STALL}_bucket\\{le="([^"]+)"\\}$`).exec(k);
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
