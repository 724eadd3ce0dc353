/**
 * The churn phase of the end-to-end benchmark (agent_bench.ts): rolling-update EndpointSlice
 * rewrites plus Service creates, deletes and port changes at a fixed rate, with tracked changes
 * timed by the prober, RSS and pending changes sampled, and unchanged Services watched.
 *
 * @module
 */
import type { FakeApiServer } from "../../fakeapi/server.ts";
import {
  clusterIP,
  type Ep,
  rollingStep,
  service,
  SERVICE_PORT,
  serviceName,
  slice,
} from "../../support/cluster.ts";
import { type BenchNet, treeStat } from "../../support/net.ts";
import { now } from "../../support/prober.ts";
import { run } from "../../netns.ts";
import { rng } from "../../rng.ts";
import { quantile, round, scrape, sleep, target } from "./measure.ts";

const PENDING = [
  "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
  "kubeproxy_sync_proxy_rules_service_changes_pending",
];

/** What {@link churn} works on and measures. */
export interface ChurnOptions {
  /** The fake API server the writes go to. */
  api: FakeApiServer;
  /** The benchmark's network, whose prober times the tracked changes. */
  net: BenchNet;
  /** The agent's pid (its process tree is measured). */
  pid: number;
  /** The agent's /metrics URL. */
  metrics: string;
  /** The cluster's size, copied into the result. */
  size: { services: number; eps: number };
  /** How long to churn. */
  seconds: number;
  /** Writes per second. */
  rate: number;
  /** Every Service's current endpoints, by index (updated in place). */
  eps: Ep[][];
  /** Services the rolling updates and port changes pick from. */
  pool: number[];
  /** Services whose endpoint changes are timed, in turn. */
  tracked: number[];
  /** Services never changed; the prober watches that they keep answering. */
  unchanged: number[];
  /** A fresh endpoint address. */
  nextIP: () => string;
  /** The index of the first Service the churn may create. */
  firstNewService: number;
}

/** The write mix's own bookkeeping. */
interface Mix {
  created: number[];
  nextNew: number;
  portChanged: Set<number>;
  steps: number;
}

/** One write: 96% a rolling-update step, else a Service create, delete or port change. */
function writeOne(o: ChurnOptions, mix: Mix, rnd: () => number): void {
  const { api } = o;
  const r = rnd();
  if (r < 0.96 || o.pool.length < 10) {
    const i = o.pool[Math.floor(rnd() * o.pool.length)];
    o.eps[i] = rollingStep(o.eps[i], mix.steps++, o.nextIP);
    api.apply(slice(i, o.eps[i]));
  } else if (r < 0.975) {
    const i = mix.nextNew++;
    mix.created.push(i);
    api.apply(service(i));
    api.apply(slice(i, [{ ip: o.nextIP() }, { ip: o.nextIP() }]));
  } else if (r < 0.99 && mix.created.length > 0) {
    const i = mix.created.shift()!;
    const { namespace, name } = serviceName(i);
    api.remove("Service", namespace, name);
    api.remove("EndpointSlice", namespace, `${name}-abcde`);
  } else {
    const i = o.pool[Math.floor(rnd() * o.pool.length)];
    const svc = service(i);
    const ports = (svc.spec as { ports: { port: number }[] }).ports;
    if (!mix.portChanged.has(i)) ports[0].port = SERVICE_PORT + 1;
    mix.portChanged.has(i) ? mix.portChanged.delete(i) : mix.portChanged.add(i);
    api.apply(svc);
  }
}

/** The tracked changes' outcomes: [seconds since the churn began, ms] and the lost ones. */
interface Tracked {
  lat: number[];
  latAt: [number, number][];
  lost: Record<string, string>[];
}

/**
 * What the kernel and the API server hold for a tracked change that never reached traffic.
 */
async function lostChange(
  o: ChurnOptions,
  i: number,
  ip: string,
  tw: number,
  e: unknown,
): Promise<Record<string, string>> {
  const { namespace, name } = serviceName(i);
  const stored = o.api.get("EndpointSlice", namespace, `${name}-abcde`);
  const kernel = await run(["nft", "list", "map", "ip", "kube-proxy", "endpoints-tcp"], {
    check: false,
  });
  return {
    writtenAt: (tw / 1000).toFixed(3),
    service: `${namespace}/${name}`,
    clusterIP: clusterIP(i),
    wanted: ip,
    error: String(e),
    apiEndpoints: JSON.stringify((stored as { endpoints?: unknown })?.endpoints),
    kernel: kernel.stdout.split("\n").filter((l) => l.includes(clusterIP(i) + " ")).join(" ")
      .slice(0, 400),
  };
}

/** Gives Service `i` a fresh endpoint and times it to traffic; a lost change is kept, not fatal. */
function trackOne(o: ChurnOptions, i: number, start: number, out: Tracked): Promise<void> {
  const ip = o.nextIP();
  o.eps[i] = [{ ip }];
  const tw = now();
  o.api.apply(slice(i, o.eps[i]));
  return o.net.prober.latency(target(i), ip, tw, 20_000).then(
    (ms) => {
      out.lat.push(ms);
      out.latAt.push([round((tw - start) / 1000), round(ms)]);
    },
    async (e) => {
      out.lost.push(await lostChange(o, i, ip, tw, e));
    },
  );
}

/** RSS and pending changes, one reading a second. */
interface Samples {
  rss: number[];
  rssAt: [number, number][];
  pending: number[];
}

/**
 * `rate` writes per second for `seconds`: 96% rolling-update steps of EndpointSlices, the rest
 * Service creates, deletes and port changes. Twice a second one tracked Service gets a new
 * endpoint and the prober times it.
 */
export async function churn(o: ChurnOptions): Promise<Record<string, unknown>> {
  await o.net.prober.send({ op: "watch", targets: o.unchanged.map(target) });
  const rnd = rng(42);
  const mix: Mix = { created: [], nextNew: o.firstNewService, portChanged: new Set(), steps: 0 };
  let writes = 0;
  const tracked: Tracked = { lat: [], latAt: [], lost: [] };
  const samples: Samples = { rss: [], rssAt: [], pending: [] };
  const cpu0 = treeStat(o.pid).cpuSeconds;
  const start = now();
  const end = start + o.seconds * 1000;
  let trackedK = 0;
  const trackers: Promise<void>[] = [];
  let nextTrack = start + 500, nextSample = start + 1000;

  while (now() < end) {
    const due = Math.floor(((now() - start) / 1000) * o.rate);
    for (; writes < due; writes++) writeOne(o, mix, rnd);
    const t = now();
    if (t >= nextTrack) {
      nextTrack += 500;
      trackers.push(trackOne(o, o.tracked[trackedK++ % o.tracked.length], start, tracked));
    }
    if (t >= nextSample) {
      nextSample += 1000;
      samples.rss.push(treeStat(o.pid).rssMB);
      samples.rssAt.push([round((t - start) / 1000), samples.rss[samples.rss.length - 1]]);
      const m = await scrape(o.metrics, PENDING);
      samples.pending.push(Object.values(m).reduce((a, b) => a + b, 0));
    }
    await sleep(5);
  }
  const wall = (now() - start) / 1000;
  const cpu = treeStat(o.pid).cpuSeconds - cpu0;
  await Promise.all(trackers);
  const watch = await o.net.prober.send({ op: "unwatch" });
  return summary(o, { wall, cpu, writes, watch }, tracked, samples);
}

/** The agent-churn result line. */
function summary(
  o: ChurnOptions,
  totals: { wall: number; cpu: number; writes: number; watch: Record<string, unknown> },
  { lat, latAt, lost }: Tracked,
  { rss, rssAt, pending }: Samples,
): Record<string, unknown> {
  const { wall, cpu, writes, watch } = totals;
  const firstMinute = rss.slice(0, Math.min(rss.length, 60));
  const afterWarmup = rss.slice(Math.min(10, rss.length - 1));
  return {
    bench: "agent-churn",
    ...o.size,
    seconds: Math.round(wall),
    writesPerSecond: round(writes / wall),
    trackedP50ms: round(quantile(lat, 0.5)),
    trackedP99ms: round(quantile(lat, 0.99)),
    trackedMaxms: round(Math.max(...lat)),
    tracked: lat.length,
    lostChanges: lost.length,
    ...(lost.length > 0 ? { lost: lost.slice(0, 3) } : {}),
    cpuShare: Math.round((cpu / wall) * 100) / 100,
    unchangedProbes: watch.probes,
    unchangedFailures: watch.failures,
    ...(Number(watch.failures) > 0 ? { failureExamples: watch.examples } : {}),
    pendingMax: pending.length ? Math.max(...pending) : -1,
    pendingLast: pending.at(-1) ?? -1,
    rssFirstMinuteMB: firstMinute.length ? Math.max(...firstMinute) : -1,
    rssMinMB: Math.min(...afterWarmup),
    rssMaxMB: Math.max(...afterWarmup),
    rssLastMB: rss.at(-1) ?? -1,
    series: { latencyMs: latAt.sort((a, b) => a[0] - b[0]), rssMB: rssAt },
  };
}
