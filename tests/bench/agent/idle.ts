/**
 * The idle measurement of the agent benchmark (issue 21): the agent at rest
 * for a while at the default --sync-period, then one foreign flush.
 *
 * - CPU share of the agent's process tree over the window (from /proc);
 * - event-loop stalls in the window, from the agent's stall probe
 *   (agent/loop_stall.ts): how many ticks ran over 50 ms late, and the
 *   smallest bucket bound every tick stayed under;
 * - full syncs in the window (each lists the kernel: there should be none
 *   before --full-sync-period);
 * - `nft flush set ip kube-proxy frontends-dnat-tcp-N` (the class set that
 *   dispatches the probed Service) by another program: time until
 *   the repair is counted (kube_nft_proxy_nftables_repairs_total) and until
 *   real traffic to a Service answers again.
 *
 * @module
 */
import { run } from "../../netns.ts";
import { type BenchNet, treeStat } from "../../support/net.ts";
import { now } from "../../support/prober.ts";
import { stalls } from "./loop_stalls.ts";
import { samples, sleep } from "./measure.ts";

/** What {@link idle} needs from the benchmark. */
export interface IdleOptions {
  pid: number;
  /** The agent's /metrics URL. */
  metrics: string;
  net: BenchNet;
  seconds: number;
  size: { services: number; eps: number };
  /** A Service target (`ip:port`) and the endpoint IP it answers from, probed after the flush. */
  probe: { target: string; reply: string };
}

const round = (x: number) => Math.round(x * 1000) / 1000;

const FULL_COUNT = 'kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}';
const REPAIRS = 'kube_nft_proxy_nftables_repairs_total{ip_family="IPv4"}';

function loadavg(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

/** Rests for `o.seconds`, then flushes a dispatch map as another program would. */
export async function idle(o: IdleOptions): Promise<Record<string, unknown>> {
  const load0 = loadavg();
  const m0 = await samples(o.metrics);
  const cpu0 = treeStat(o.pid).cpuSeconds, t0 = now();
  await sleep(o.seconds * 1000);
  const cpu1 = treeStat(o.pid).cpuSeconds, wall = (now() - t0) / 1000;
  const m1 = await samples(o.metrics);
  const load1 = loadavg();

  // Another program flushes the class set that dispatches the probed Service (and every other
  // Service with as many endpoints): they all stop answering.
  const set = await classSetOf(o.probe.target);
  const repairs0 = m1.get(REPAIRS) ?? 0;
  const tf = now();
  await run(["nft", "flush", "set", "ip", "kube-proxy", set]);
  const traffic = o.net.prober.latency(o.probe.target, o.probe.reply, tf, 60_000);
  let repairMs = NaN;
  for (const until = tf + 60_000; now() < until;) {
    if (((await samples(o.metrics)).get(REPAIRS) ?? 0) > repairs0) {
      repairMs = now() - tf;
      break;
    }
    await sleep(20);
  }
  const trafficMs = await traffic.catch(() => NaN);
  return {
    bench: "agent-idle",
    ...o.size,
    seconds: Math.round(wall),
    cpuShare: round((cpu1 - cpu0) / wall),
    cpuSeconds: round(cpu1 - cpu0),
    ...stalls(m0, m1),
    fullSyncs: (m1.get(FULL_COUNT) ?? 0) - (m0.get(FULL_COUNT) ?? 0),
    foreignFlushRepairedMs: Math.round(repairMs),
    foreignFlushTrafficMs: Math.round(trafficMs),
    loadavgBefore: load0,
    loadavgAfter: load1,
  };
}

/** The class set (`frontends-dnat-tcp-N`) holding frontend `target` (`ip:port`, TCP). */
async function classSetOf(target: string): Promise<string> {
  const [ip, port] = target.split(":");
  const sets = await run(["nft", "list", "sets", "ip"]);
  for (const [, name] of sets.stdout.matchAll(/set (frontends-dnat-tcp-\S+) \{/g)) {
    const key = `{ ${ip} . tcp . ${port} }`;
    const r = await run(["nft", "get", "element", "ip", "kube-proxy", name, key], { check: false });
    if (r.code === 0) return name;
  }
  throw new Error(`no class set holds ${target}`);
}
