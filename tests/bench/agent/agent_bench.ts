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
 *   endpoint (each change on its own, the first as soon as the agent is quiet after the cold
 *   start, the others spaced past --min-sync-period; see single_changes.ts);
 * - `agent-change-after-idle`: one more endpoint change, after KNP_BENCH_AFTER_IDLE_SECONDS
 *   (default 20; 0 skips it) without any;
 * - `agent-idle`: the agent at rest (default --sync-period) for KNP_BENCH_IDLE_SECONDS (default
 *   300; 0 skips it): CPU share, event-loop stalls, full syncs, then the time to repair another
 *   program's flush of the dispatch map (see idle.ts);
 * - `agent-big-deployment`: one Service of 5000 endpoints in 50 slices, rolled at 20 pods a
 *   second (KNP_BENCH_BIG_STEPS or --big-steps pods, default 200; 0 skips it): each write's
 *   time to the kernel's commit and the elements it wrote (see big_deployment.ts);
 * - `agent-churn`: rolling-update EndpointSlice rewrites plus Service creates, deletes and port
 *   changes at a fixed rate; latency of tracked changes, failed probes to unchanged Services,
 *   the agent's CPU share, its pending-change backlog and RSS over time; `series` holds each
 *   tracked change's latency and each RSS sample with its time since the churn began (for
 *   `deno task plot`).
 *
 * Runs INSIDE the node namespace the driver (tests/bench/main.ts) made, and refuses otherwise.
 * Usage: agent_bench.ts --services N --eps E [--churn-seconds S] [--churn-rate R]
 *        [--settle-seconds S] [--big-steps S]
 * Environment: KNP_BENCH_AGENT_LOG=FILE keeps the agent's output; KNP_BENCH_AGENT_ARGS adds
 * agent flags (e.g. "--v=2"); KNP_BENCH_CHURN_SECONDS and KNP_BENCH_SETTLE_SECONDS override the
 * churn length and the wait from the cold start to the steady reading; KNP_BENCH_NFT_MONITOR=FILE records
 * `nft monitor` (every ruleset change in the node namespace, timestamped) for diagnosis; under
 * heavy churn nft monitor drops events (netlink buffer), so a missing line proves nothing.
 *
 * @module
 */
import { FakeApiServer } from "../../fakeapi/server.ts";
import { AgentProcess, freePort } from "../../e2e/fixtures/agent_process.ts";
import { agentFlags } from "../../e2e/fixtures/agent_under_test.ts";
import {
  type Ep,
  freshIP,
  initialEndpoints,
  node,
  NODE_NAME,
  service,
  serviceCIDR,
  slice,
} from "../../support/cluster.ts";
import { BenchNet, treeStat } from "../../support/net.ts";
import { idle } from "./idle.ts";
import { churn } from "./churn.ts";
import { bigDeployment } from "./big_deployment.ts";
import { collectOwnGarbage, round, scrape, sleep, target } from "./measure.ts";
import { changeAfterIdle, type ChangeRig, singleChanges, type Size } from "./single_changes.ts";
import { lines } from "../../support/lines.ts";
import { now } from "../../support/prober.ts";

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

/** Fills `api` with the node, the ServiceCIDR and N Services of E endpoints; their endpoints. */
function populate(api: FakeApiServer, N: number, E: number): Ep[][] {
  const eps: Ep[][] = [];
  api.apply(node());
  api.apply(serviceCIDR());
  for (let i = 0; i < N; i++) {
    eps.push(initialEndpoints(i, E));
    api.apply(service(i));
    api.apply(slice(i, eps[i]));
  }
  return eps;
}

/**
 * Which Services play which part: `sampled` for the cold start and watched, never changed,
 * during churn (spread over the list, with the last Service listed among them); `tracked` for
 * the measured changes; the rest for churn.
 */
function roles(N: number): { sampled: Set<number>; tracked: number[]; churnPool: number[] } {
  const sampled = new Set<number>();
  for (let k = 0; k < 100; k++) sampled.add(Math.floor((k * N) / 100));
  sampled.add(N - 1);
  const others = [...Array(N).keys()].filter((i) => !sampled.has(i));
  return { sampled, tracked: others.slice(0, 20), churnPool: others.slice(20) };
}

/** Diagnosis (KNP_BENCH_NFT_MONITOR=FILE): every nftables change here, timestamped, into FILE. */
function startMonitor(): Deno.ChildProcess | undefined {
  const monitorFile = Deno.env.get("KNP_BENCH_NFT_MONITOR");
  if (!monitorFile) return undefined;
  const monitor = new Deno.Command("nft", { args: ["monitor"], stdin: "null", stdout: "piped" })
    .spawn();
  const out = Deno.openSync(monitorFile, { create: true, write: true, truncate: true });
  const enc = new TextEncoder();
  void (async () => {
    for await (const line of lines(monitor.stdout)) {
      out.writeSync(enc.encode(`${(now() / 1000).toFixed(3)} ${line}\n`));
    }
    out.close();
  })();
  return monitor;
}

/**
 * Starts the agent with `args` and times it until every sampled ClusterIP answers; emits
 * agent-cold. The agent is handed to `started` at once, so the caller can stop it on failure.
 */
async function coldStart(
  net: BenchNet,
  sampled: Set<number>,
  args: string[],
  size: Size,
  started: (a: AgentProcess) => void,
): Promise<AgentProcess> {
  const log = Deno.env.get("KNP_BENCH_AGENT_LOG");
  const logFile = log ? Deno.openSync(log, { create: true, write: true, truncate: true }) : null;
  const enc = new TextEncoder();
  const coldAnswer = net.prober.send({
    op: "all",
    targets: [...sampled].map(target),
    timeoutMs: 300_000,
  });
  await sleep(300); // the prober is polling: nothing answers yet
  const t0 = now();
  const agent = AgentProcess.start(args, {
    echo: (l) => logFile?.writeSync(enc.encode(`[${l.stream}] ${l.text}\n`)),
  });
  started(agent);
  // Beside the agent's own lines, the bench's clock: the cold start's phases read off one log.
  const mark = (what: string, t: number) =>
    logFile?.writeSync(enc.encode(`[bench] ${what} ${new Date(t).toISOString()}\n`));
  mark("agent spawned", t0);
  void agent.status.finally(() => logFile?.close());
  let cold: Record<string, unknown>;
  try {
    cold = await Promise.race([
      coldAnswer,
      agent.status.then((s) => {
        throw new Error(`the agent exited with ${s.code}\n${agent.tail()}`);
      }),
    ]);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${agent.tail()}`);
  }
  const coldStat = treeStat(agent.pid);
  mark("every sampled ClusterIP answered", cold.t as number);
  emit({
    bench: "agent-cold",
    ...size,
    seconds: round(((cold.t as number) - t0) / 100) / 10,
    sampled: sampled.size,
    peakMB: coldStat.hwmMB,
    rssMB: coldStat.rssMB,
    cpuSeconds: round(coldStat.cpuSeconds),
  });
  return agent;
}

/** RSS, peak and JS heap at rest, against the memory issue's targets; emits agent-steady. */
async function steadyReading(pid: number, metrics: string, size: Size): Promise<void> {
  const steady = treeStat(pid);
  const heap = await scrape(metrics, HEAP);
  const goal = memoryTarget(size.services, size.eps);
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
}

/** The agent's flags: the e2e base flags for this node, then KNP_BENCH_AGENT_ARGS. */
function benchFlags(kubeconfig: string, healthzPort: number, metricsPort: number): string[] {
  // The e2e drivers' base flags with the bench's node, IPv4 only and the default
  // --min-sync-period; extra flags from the environment go last, so they win.
  return [
    ...agentFlags(kubeconfig, healthzPort, metricsPort, {
      nodeName: NODE_NAME,
      clusterCIDR: "198.18.1.0/24",
      minSyncPeriod: null,
    }),
    ...(Deno.env.get("KNP_BENCH_AGENT_ARGS") ?? "").split(" ").filter((a) => a !== ""),
  ];
}

/**
 * After the cold start: the single changes, the first as soon as the agent is quiet (issue 21's
 * method); the steady reading `settleSeconds` after the cold start; then one change after the
 * agent was left alone for KNP_BENCH_AFTER_IDLE_SECONDS (default 20; 0 skips it).
 */
async function changesAndRest(
  rig: ChangeRig,
  metrics: string,
  tracked: number[],
  settleSeconds: number,
): Promise<void> {
  const coldEnd = now();
  await collectOwnGarbage();
  for (const line of await singleChanges(rig, tracked)) emit(line);
  const lastChange = now();
  await sleep(coldEnd + settleSeconds * 1000 - now());
  await steadyReading(rig.pid, metrics, rig.size);
  const afterIdle = Number(Deno.env.get("KNP_BENCH_AFTER_IDLE_SECONDS") ?? 20) * 1000;
  if (afterIdle > 0) emit(await changeAfterIdle(rig, tracked[10], lastChange + afterIdle - now()));
}

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
  const size: Size = { services: N, eps: E };

  const net = await BenchNet.create();
  const api = FakeApiServer.start({ serviceCIDRs: true, bookmarkIntervalMs: 5000 });
  const eps = populate(api, N, E);
  const { sampled, tracked, churnPool } = roles(N);
  const metricsPort = freePort(), healthzPort = freePort();
  const kubeconfig = api.writeKubeconfig();
  const args = benchFlags(kubeconfig, healthzPort, metricsPort);
  const metrics = `http://127.0.0.1:${metricsPort}/metrics`;
  let fresh = 0;
  const nextIP = () => freshIP(fresh++);
  let agent: AgentProcess | undefined;
  const monitor = startMonitor();
  try {
    const a = await coldStart(net, sampled, args, size, (x) => agent = x);
    const rig = { api, net, pid: a.pid, eps, size, nextIP };
    await changesAndRest(rig, metrics, tracked, settleSeconds);

    // --- idle, then one foreign flush
    const idleSeconds = Number(Deno.env.get("KNP_BENCH_IDLE_SECONDS") ?? arg("idle-seconds", 300));
    if (idleSeconds > 0) {
      const i = tracked[0];
      const probe = { target: target(i), reply: eps[i][0].ip };
      emit(await idle({ pid: a.pid, metrics, net, seconds: idleSeconds, size, probe }));
    }

    const minSyncPeriod = flagValue(args, ["min-sync-period", "iptables-min-sync-period"]) ??
      "1s (default)";
    const bigSteps = Number(Deno.env.get("KNP_BENCH_BIG_STEPS") ?? arg("big-steps", 200));
    // Its index and ClusterIP lie outside every other phase's (churn creates from N + 5 up).
    const maxOtherIndex = N + 5 + Math.ceil(churnSeconds * churnRate * 0.05);
    if (bigSteps > 0) {
      emit(
        await bigDeployment({
          ...{ api, net, size, pid: a.pid, steps: bigSteps, rate: 20, index: N + 1_000_000 },
          ...{ metrics, unchanged: [...sampled][0], maxOtherIndex, minSyncPeriod },
        }),
      );
    }

    if (churnSeconds > 0) {
      const pool = churnPool, unchanged = [...sampled], firstNewService = N + 5;
      emit({
        ...await churn({
          ...{ api, net, pid: a.pid, metrics, size, eps, pool, tracked, unchanged, nextIP },
          ...{ seconds: churnSeconds, rate: churnRate, firstNewService },
        }),
        // Under churn a change waits for this (batched syncs): the plots say which it was.
        minSyncPeriod,
      });
    }
    const st = await a.stop("SIGTERM");
    if (st.code !== 0) throw new Error(`the agent exited with ${st.code}\n${a.tail()}`);
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
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    console.error(`agent_bench: ${(e as Error).stack ?? e}`);
    Deno.exit(1);
  }
}
