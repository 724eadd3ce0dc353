/**
 * The end-to-end benchmark: what an operator sees. The real agent is started the way
 * `deno task start` starts it, against the fake API server already holding N Services × E
 * ready endpoints; a client in another namespace times real TCP connections to ClusterIPs,
 * answered by backends in a third; RSS and CPU are read from /proc for the agent's process tree.
 *
 * Measured, each printed as one JSON line:
 * - `agent-cold`: process start until every sampled ClusterIP answers, and the peak RSS;
 * - `agent-steady`: RSS at rest after the cold start and a few full syncs, the JS heap and native
 *   shares, and the memory issue's targets for the sizes it names (`memoryTargetMet`);
 * - `agent-endpoint-change` / `agent-new-service`: API write until traffic reaches the new
 *   endpoint (each change on its own, spaced past --min-sync-period);
 * - `agent-idle`: the agent at rest (default --sync-period) for KNP_BENCH_IDLE_SECONDS (default
 *   300; 0 skips it): CPU share, event-loop stalls, full syncs, then the time to repair another
 *   program's flush of the dispatch map (see idle.ts);
 * - `agent-churn`: rolling-update EndpointSlice rewrites plus Service creates, deletes and port
 *   changes at a fixed rate; latency of tracked changes, failed probes to unchanged Services,
 *   the agent's CPU share, its pending-change backlog and RSS over time; `series` holds each
 *   tracked change's latency and each RSS sample with its time since the churn began (for
 *   `deno task plot`).
 *
 * Runs INSIDE the node namespace the driver (tests/bench/main.ts) made, and refuses otherwise.
 * Usage: agent_bench.ts --services N --eps E [--churn-seconds S] [--churn-rate R]
 *        [--settle-seconds S]
 * Environment: KNP_BENCH_AGENT_LOG=FILE keeps the agent's output; KNP_BENCH_AGENT_ARGS adds
 * agent flags (e.g. "--v=2"); KNP_BENCH_CHURN_SECONDS and KNP_BENCH_SETTLE_SECONDS override the
 * churn length and the wait before the steady reading; KNP_BENCH_NFT_MONITOR=FILE records
 * `nft monitor` (every ruleset change in the node namespace, timestamped) for diagnosis; under
 * heavy churn nft monitor drops events (netlink buffer), so a missing line proves nothing.
 *
 * @module
 */
import { FakeApiServer } from "../../fakeapi/server.ts";
import { AgentProcess, freePort } from "../../e2e/fixtures/agent_process.ts";
import { agentFlags } from "../../e2e/fixtures/agent_under_test.ts";
import {
  clusterIP,
  type Ep,
  freshIP,
  initialEndpoints,
  node,
  NODE_NAME,
  rollingStep,
  service,
  SERVICE_PORT,
  serviceCIDR,
  serviceName,
  slice,
} from "../../support/cluster.ts";
import { BenchNet, treeStat } from "../../support/net.ts";
import { idle } from "./idle.ts";
import { now } from "../../support/prober.ts";
import { run } from "../../netns.ts";
import { rng } from "../../rng.ts";

function arg(name: string, dflt: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
}

/** The value of the last `--name=V` or `--name V` in args, for any of the names. */
function flagValue(args: readonly string[], names: string[]): string | undefined {
  let v: string | undefined;
  args.forEach((a, i) => {
    for (const n of names) {
      if (a.startsWith(`--${n}=`)) v = a.slice(n.length + 3);
      else if (a === `--${n}`) v = args[i + 1];
    }
  });
  return v;
}

function emit(line: Record<string, unknown>): void {
  console.log(JSON.stringify(line));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const target = (i: number) => `${clusterIP(i)}:${SERVICE_PORT}`;

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

const round = (x: number) => Math.round(x * 10) / 10;

/** Reads a few gauges from the agent's /metrics. */
async function scrape(url: string, names: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  try {
    const text = await (await fetch(url, { signal: AbortSignal.timeout(2000) })).text();
    for (const n of names) {
      const m = text.match(new RegExp(`^${n}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "m"));
      if (m) out[n] = Number(m[1]);
    }
  } catch { /* not answering: leave out */ }
  return out;
}

const PENDING = [
  "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
  "kubeproxy_sync_proxy_rules_service_changes_pending",
];
/** The memory issue's targets (RSS, MB) for the sizes it names. */
const MEMORY_TARGETS: Record<string, { steadyMB?: number; peakMB?: number }> = {
  "1000x10": { steadyMB: 150, peakMB: 150 },
  "10000x10": { steadyMB: 200 },
  "30000x10": { steadyMB: 250, peakMB: 350 },
  "60000x10": { peakMB: 600 },
};

function memoryTarget(services: number, eps: number) {
  return MEMORY_TARGETS[`${services}x${eps}`];
}

const HEAP = ["nodejs_heap_size_used_bytes", "nodejs_heap_size_total_bytes"];

async function main(): Promise<void> {
  if (Deno.env.get("KNP_IN_TEST_NETNS") !== "1") {
    console.error("agent_bench.ts programs the kernel: run it through `deno task bench`");
    Deno.exit(2);
  }
  const N = arg("services", 1000), E = arg("eps", 10);
  // The environment may override the driver's choice, for quick diagnostic runs.
  const churnSeconds = Number(Deno.env.get("KNP_BENCH_CHURN_SECONDS") ?? arg("churn-seconds", 60));
  const churnRate = arg("churn-rate", 100);
  const settleSeconds = Number(
    Deno.env.get("KNP_BENCH_SETTLE_SECONDS") ?? arg("settle-seconds", 20),
  );
  const size = { services: N, eps: E };

  const net = await BenchNet.create();
  const api = FakeApiServer.start({ serviceCIDRs: true, bookmarkIntervalMs: 5000 });
  const eps: Ep[][] = [];
  api.apply(node());
  api.apply(serviceCIDR());
  for (let i = 0; i < N; i++) {
    eps.push(initialEndpoints(i, E));
    api.apply(service(i));
    api.apply(slice(i, eps[i]));
  }
  // Sampled for the cold start and watched, never changed, during churn: spread over the list,
  // with the last Service listed among them.
  const sampled = new Set<number>();
  for (let k = 0; k < 100; k++) sampled.add(Math.floor((k * N) / 100));
  sampled.add(N - 1);
  const others = [...Array(N).keys()].filter((i) => !sampled.has(i));
  const tracked = others.slice(0, 20); // measured changes
  const churnPool = others.slice(20);

  const metricsPort = freePort(), healthzPort = freePort();
  const kubeconfig = api.writeKubeconfig();
  // The e2e drivers' base flags with the bench's node, IPv4 only and the default
  // --min-sync-period; extra flags from the environment go last, so they win.
  const args = [
    ...agentFlags(kubeconfig, healthzPort, metricsPort, {
      nodeName: NODE_NAME,
      clusterCIDR: "198.18.1.0/24",
      minSyncPeriod: null,
    }),
    ...(Deno.env.get("KNP_BENCH_AGENT_ARGS") ?? "").split(" ").filter((a) => a !== ""),
  ];
  const metrics = `http://127.0.0.1:${metricsPort}/metrics`;
  const log = Deno.env.get("KNP_BENCH_AGENT_LOG");
  const logFile = log ? Deno.openSync(log, { create: true, write: true, truncate: true }) : null;
  const enc = new TextEncoder();

  let agent: AgentProcess | undefined;
  // Diagnosis: every nftables change in this namespace, timestamped, into a file.
  const monitorFile = Deno.env.get("KNP_BENCH_NFT_MONITOR");
  const monitor = monitorFile
    ? new Deno.Command("nft", { args: ["monitor"], stdin: "null", stdout: "piped" }).spawn()
    : undefined;
  if (monitor && monitorFile) {
    const out = Deno.openSync(monitorFile, { create: true, write: true, truncate: true });
    const enc = new TextEncoder();
    void (async () => {
      let buf = "";
      for await (const chunk of monitor.stdout.pipeThrough(new TextDecoderStream())) {
        buf += chunk;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          out.writeSync(enc.encode(`${(now() / 1000).toFixed(3)} ${buf.slice(0, i)}\n`));
          buf = buf.slice(i + 1);
        }
      }
      out.close();
    })();
  }
  try {
    // --- cold start
    const coldAnswer = net.prober.send({
      op: "all",
      targets: [...sampled].map(target),
      timeoutMs: 300_000,
    });
    await sleep(300); // the prober is polling: nothing answers yet
    const t0 = now();
    agent = AgentProcess.start(args, {
      echo: (l) => logFile?.writeSync(enc.encode(`[${l.stream}] ${l.text}\n`)),
    });
    const pid = agent.pid;
    let cold: Record<string, unknown>;
    try {
      cold = await Promise.race([
        coldAnswer,
        agent.status.then((s) => {
          throw new Error(`the agent exited with ${s.code}\n${agent?.tail()}`);
        }),
      ]);
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${agent.tail()}`);
    }
    const coldStat = treeStat(pid);
    emit({
      bench: "agent-cold",
      ...size,
      seconds: round(((cold.t as number) - t0) / 100) / 10,
      sampled: sampled.size,
      peakMB: coldStat.hwmMB,
      rssMB: coldStat.rssMB,
      cpuSeconds: round(coldStat.cpuSeconds),
    });

    // --- steady: a few full syncs (--sync-period) and the GC settle
    await sleep(settleSeconds * 1000);
    const steady = treeStat(pid);
    const heap = await scrape(metrics, HEAP);
    const goal = memoryTarget(N, E);
    emit({
      bench: "agent-steady",
      ...size,
      rssMB: steady.rssMB,
      peakMB: steady.hwmMB,
      ...(goal?.steadyMB !== undefined ? { targetSteadyMB: goal.steadyMB } : {}),
      ...(goal?.peakMB !== undefined ? { targetPeakMB: goal.peakMB } : {}),
      ...(goal
        ? {
          memoryTargetMet: steady.rssMB <= (goal.steadyMB ?? Infinity) &&
            steady.hwmMB <= (goal.peakMB ?? Infinity),
        }
        : {}),
      ...(heap.nodejs_heap_size_used_bytes !== undefined
        ? {
          jsHeapUsedMB: Math.round(heap.nodejs_heap_size_used_bytes / 1048576),
          jsHeapTotalMB: Math.round((heap.nodejs_heap_size_total_bytes ?? 0) / 1048576),
          nativeMB: steady.rssMB - Math.round((heap.nodejs_heap_size_total_bytes ?? 0) / 1048576),
        }
        : {}),
    });

    // --- one endpoint change, then one new Service, each alone
    let fresh = 0;
    const epLat: number[] = [];
    for (let k = 0; k < 10; k++) {
      const i = tracked[k];
      const ip = freshIP(fresh++);
      eps[i] = [{ ip }];
      await sleep(1200);
      const t = now();
      api.apply(slice(i, eps[i]));
      epLat.push(await net.prober.latency(target(i), ip, t));
    }
    emit({
      bench: "agent-endpoint-change",
      ...size,
      p50ms: round(quantile(epLat, 0.5)),
      maxms: round(Math.max(...epLat)),
      n: epLat.length,
      allms: epLat.map(round),
    });
    const svcLat: number[] = [];
    for (let k = 0; k < 5; k++) {
      const i = N + k;
      const ip = freshIP(fresh++);
      await sleep(1200);
      const t = now();
      api.apply(service(i));
      api.apply(slice(i, [{ ip }]));
      svcLat.push(await net.prober.latency(target(i), ip, t));
    }
    emit({
      bench: "agent-new-service",
      ...size,
      p50ms: round(quantile(svcLat, 0.5)),
      maxms: round(Math.max(...svcLat)),
      n: svcLat.length,
      allms: svcLat.map(round),
    });

    // --- idle, then one foreign flush
    const idleSeconds = Number(Deno.env.get("KNP_BENCH_IDLE_SECONDS") ?? arg("idle-seconds", 300));
    if (idleSeconds > 0) {
      const i = tracked[0];
      const probe = { target: target(i), reply: eps[i][0].ip };
      emit(await idle({ pid, metrics, net, seconds: idleSeconds, size, probe }));
    }

    // --- churn
    if (churnSeconds > 0) {
      emit({
        ...await churn({
          api,
          net,
          pid,
          metrics,
          size,
          seconds: churnSeconds,
          rate: churnRate,
          eps,
          pool: churnPool,
          tracked,
          unchanged: [...sampled],
          nextIP: () => freshIP(fresh++),
          firstNewService: N + 5,
        }),
        // Under churn a change waits for this (batched syncs): the plots say which it was.
        minSyncPeriod: flagValue(args, ["min-sync-period", "iptables-min-sync-period"]) ??
          "1s (default)",
      });
    }
    const st = await agent.stop("SIGTERM");
    if (st.code !== 0) throw new Error(`the agent exited with ${st.code}\n${agent.tail()}`);
    agent = undefined;
  } finally {
    if (agent) await agent.stop("SIGKILL");
    await api.close();
    try {
      monitor?.kill("SIGTERM");
      await monitor?.status;
    } catch { /* gone */ }
    await net.close();
    await Deno.remove(kubeconfig).catch(() => {});
    logFile?.close();
  }
}

interface ChurnOptions {
  api: FakeApiServer;
  net: BenchNet;
  pid: number;
  metrics: string;
  size: { services: number; eps: number };
  seconds: number;
  rate: number;
  eps: Ep[][];
  pool: number[];
  tracked: number[];
  unchanged: number[];
  nextIP: () => string;
  firstNewService: number;
}

/**
 * `rate` writes per second for `seconds`: 96% rolling-update steps of EndpointSlices, the rest
 * Service creates, deletes and port changes. Twice a second one tracked Service gets a new
 * endpoint and the prober times it.
 */
async function churn(o: ChurnOptions): Promise<Record<string, unknown>> {
  const { api, net } = o;
  await net.prober.send({ op: "watch", targets: o.unchanged.map(target) });
  const rnd = rng(42);
  const created: number[] = [];
  let nextNew = o.firstNewService;
  const portChanged = new Set<number>();
  let writes = 0, steps = 0;
  const lat: number[] = [];
  // The time series behind the summary, for plots: [seconds since the churn began, value].
  const latAt: [number, number][] = [];
  const rssAt: [number, number][] = [];
  const lost: Record<string, string>[] = [];
  const rss: number[] = [];
  const pending: number[] = [];
  const cpu0 = (await Promise.resolve(treeStat(o.pid))).cpuSeconds;
  const start = now();
  const end = start + o.seconds * 1000;
  let trackedK = 0;
  const trackers: Promise<void>[] = [];
  let nextTrack = start + 500, nextSample = start + 1000;

  while (now() < end) {
    const due = Math.floor(((now() - start) / 1000) * o.rate);
    while (writes < due) {
      writes++;
      const r = rnd();
      if (r < 0.96 || o.pool.length < 10) {
        const i = o.pool[Math.floor(rnd() * o.pool.length)];
        o.eps[i] = rollingStep(o.eps[i], steps++, o.nextIP);
        api.apply(slice(i, o.eps[i]));
      } else if (r < 0.975) {
        const i = nextNew++;
        created.push(i);
        api.apply(service(i));
        api.apply(slice(i, [{ ip: o.nextIP() }, { ip: o.nextIP() }]));
      } else if (r < 0.99 && created.length > 0) {
        const i = created.shift()!;
        const { namespace, name } = serviceName(i);
        api.remove("Service", namespace, name);
        api.remove("EndpointSlice", namespace, `${name}-abcde`);
      } else {
        const i = o.pool[Math.floor(rnd() * o.pool.length)];
        const svc = service(i);
        const ports = (svc.spec as { ports: { port: number }[] }).ports;
        if (!portChanged.has(i)) ports[0].port = SERVICE_PORT + 1;
        portChanged.has(i) ? portChanged.delete(i) : portChanged.add(i);
        api.apply(svc);
      }
    }
    const t = now();
    if (t >= nextTrack) {
      nextTrack += 500;
      const i = o.tracked[trackedK++ % o.tracked.length];
      const ip = o.nextIP();
      o.eps[i] = [{ ip }];
      const tw = now();
      api.apply(slice(i, o.eps[i]));
      trackers.push(
        net.prober.latency(target(i), ip, tw, 20_000).then(
          (ms) => {
            lat.push(ms);
            latAt.push([round((tw - start) / 1000), round(ms)]);
          },
          async (e) => {
            // Lost: keep going, and keep what the kernel and the API server hold for it.
            const { namespace, name } = serviceName(i);
            const stored = api.get("EndpointSlice", namespace, `${name}-abcde`);
            const kernel = await run(["nft", "list", "map", "ip", "kube-proxy", "endpoints-tcp"], {
              check: false,
            });
            lost.push({
              writtenAt: (tw / 1000).toFixed(3),
              service: `${namespace}/${name}`,
              clusterIP: clusterIP(i),
              wanted: ip,
              error: String(e),
              apiEndpoints: JSON.stringify((stored as { endpoints?: unknown })?.endpoints),
              kernel: kernel.stdout.split("\n").filter((l) => l.includes(clusterIP(i) + " ")).join(
                " ",
              )
                .slice(0, 400),
            });
          },
        ),
      );
    }
    if (t >= nextSample) {
      nextSample += 1000;
      rss.push(treeStat(o.pid).rssMB);
      rssAt.push([round((t - start) / 1000), rss[rss.length - 1]]);
      const m = await scrape(o.metrics, PENDING);
      pending.push(Object.values(m).reduce((a, b) => a + b, 0));
    }
    await sleep(5);
  }
  const wall = (now() - start) / 1000;
  const cpu = treeStat(o.pid).cpuSeconds - cpu0;
  await Promise.all(trackers);
  const watch = await net.prober.send({ op: "unwatch" });
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

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    console.error(`agent_bench: ${(e as Error).stack ?? e}`);
    Deno.exit(1);
  }
}
