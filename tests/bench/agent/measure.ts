/**
 * Small helpers the end-to-end benchmark's phases share (agent_bench.ts, churn.ts): the probe
 * target of a Service, quantiles, rounding and reading gauges off the agent's /metrics.
 *
 * @module
 */
import { clusterIP, SERVICE_PORT } from "../../support/cluster.ts";

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<unknown> => new Promise((r) => setTimeout(r, ms));

/** The prober's target for Service `i`: its ClusterIP and port. */
export const target = (i: number): string => `${clusterIP(i)}:${SERVICE_PORT}`;

/** The `q` quantile of `xs` (nearest rank); NaN when empty. */
export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

/** `x` to one decimal. */
export const round = (x: number): number => Math.round(x * 10) / 10;

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

/** Reads a few gauges from the agent's /metrics; one that is missing, or no answer, is left out. */
export async function scrape(url: string, names: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const all = await samples(url, 2000).catch(() => new Map<string, number>());
  for (const n of names) {
    for (const [k, v] of all) {
      if (k === n || k.startsWith(`${n}{`)) {
        out[n] = v;
        break;
      }
    }
  }
  return out;
}

/**
 * A major collection of this process (the fake API server holds the whole cluster: at 60k a
 * collection takes ~0.5 s of its main thread and both CPUs' helper threads), done now so that
 * one does not land on the timed phase that follows and slow the agent, the kernel and the
 * prober with it. Needs --expose-gc (tests/bench/main.ts passes it); a no-op without.
 */
export async function collectOwnGarbage(): Promise<void> {
  (globalThis as { gc?: () => void }).gc?.();
  await sleep(1000); // concurrent sweeping finishes
}
