/**
 * Single changes, each on its own, timed from the API write until traffic reaches the new
 * endpoint: issue 21's method. The first is made as soon as the agent has gone quiet after the
 * cold start (its process tree under 10% of a core for 1 s), the others 1.2 s apart (past
 * --min-sync-period); one more comes after the agent has been left idle for a while, the way
 * a change meets a node at rest.
 *
 * @module
 */
import type { FakeApiServer } from "../../fakeapi/server.ts";
import { type Ep, service, slice } from "../../support/cluster.ts";
import { type BenchNet, treeStat } from "../../support/net.ts";
import { now } from "../../support/prober.ts";
import { CommitLog } from "./commit_log.ts";
import { quantile, round, sleep, target } from "./measure.ts";

/** The cluster's size, copied into every result line. */
export type Size = { services: number; eps: number };

/**
 * Latencies of one kind of change: write to traffic, and write to the kernel's commit; and the
 * agent's page faults from the write until traffic got through.
 */
interface Timed {
  traffic: number[];
  commit: number[];
  faults: number[];
}

const noneTimed = (): Timed => ({ traffic: [], commit: [], faults: [] });

/** What the single changes need of the bench. */
export interface ChangeRig {
  api: FakeApiServer;
  net: BenchNet;
  /** The agent's process. */
  pid: number;
  /** Every Service's endpoints, updated as the changes replace them. */
  eps: Ep[][];
  size: Size;
  /** A fresh endpoint address per call. */
  nextIP: () => string;
}

/** Spacing of the single changes: past the default --min-sync-period of 1 s. */
const SPACING_MS = 1200;

/**
 * Resolves once the process tree of `pid` has used less than `share` of a core over the last
 * `windowMs`, or after `timeoutMs`; returns how long that took, in ms.
 */
export async function waitQuiet(
  pid: number,
  { share = 0.1, windowMs = 1000, timeoutMs = 60_000 } = {},
): Promise<number> {
  const t0 = now();
  const seen: { t: number; cpu: number }[] = [{ t: t0, cpu: treeStat(pid).cpuSeconds }];
  while (now() - t0 < timeoutMs) {
    await sleep(100);
    const t = now(), cpu = treeStat(pid).cpuSeconds;
    seen.push({ t, cpu });
    while (seen.length > 1 && t - seen[1].t >= windowMs) seen.shift();
    const first = seen[0];
    if (t - first.t >= windowMs && (cpu - first.cpu) * 1000 < share * (t - first.t)) break;
  }
  return now() - t0;
}

/**
 * Ten endpoint changes (the first as soon as the agent is quiet), then five new Services,
 * 1.2 s apart; returns agent-endpoint-change and agent-new-service. With
 * KNP_BENCH_COMMIT_CLOCK=1 a commit stamper also times each write to the kernel's commit of it,
 * splitting the latency into API and agent, and kernel and probe (a diagnosis: the stamper is one
 * more process waking at every commit).
 */
export async function singleChanges(
  rig: ChangeRig,
  tracked: number[],
): Promise<Record<string, unknown>[]> {
  const { api, eps, size } = rig;
  // The stamper is a process of its own: started before the wait, its start-up is not timed.
  const clock = await commitClock();
  const quietWaitMs = await waitQuiet(rig.pid);
  const ep = noneTimed(), svc = noneTimed();
  for (let k = 0; k < 10; k++) {
    if (k > 0) await sleep(SPACING_MS);
    const i = tracked[k], ip = rig.nextIP();
    eps[i] = [{ ip }];
    await timed(rig, clock, () => api.apply(slice(i, eps[i])), i, ip, ep);
  }
  const quiet = { quietWaitSeconds: round(quietWaitMs / 100) / 10 };
  const lines: Record<string, unknown>[] = [
    { ...latencyLine("agent-endpoint-change", size, ep), ...quiet },
  ];
  for (let k = 0; k < 5; k++) {
    await sleep(SPACING_MS);
    const i = size.services + k, ip = rig.nextIP();
    const write = () => {
      api.apply(service(i));
      api.apply(slice(i, [{ ip }]));
    };
    await timed(rig, clock, write, i, ip, svc);
  }
  lines.push(latencyLine("agent-new-service", size, svc));
  await clock?.stop();
  return lines;
}

/**
 * One endpoint change of Service `i` after `idleMs` without any; returns
 * agent-change-after-idle. On this VM memory left untouched for seconds is slow to touch
 * again (docs/benchmarks.md, eleventh round): this is the change that pays for it.
 */
export async function changeAfterIdle(
  rig: ChangeRig,
  i: number,
  idleMs: number,
): Promise<Record<string, unknown>> {
  const clock = await commitClock();
  await sleep(idleMs);
  const ip = rig.nextIP(), lat = noneTimed();
  rig.eps[i] = [{ ip }];
  await timed(rig, clock, () => rig.api.apply(slice(i, rig.eps[i])), i, ip, lat);
  await clock?.stop();
  return {
    bench: "agent-change-after-idle",
    ...rig.size,
    idleSeconds: round(idleMs / 100) / 10,
    ms: round(lat.traffic[0]),
    faults: lat.faults[0],
    ...(lat.commit.length > 0 ? { commitMs: round(lat.commit[0]) } : {}),
  };
}

/** The commit stamper, when KNP_BENCH_COMMIT_CLOCK=1. */
function commitClock(): Promise<CommitLog | null> {
  return Deno.env.get("KNP_BENCH_COMMIT_CLOCK") === "1" ? CommitLog.open() : Promise.resolve(null);
}

/** Makes one change and records its time to traffic (and to the kernel, with the clock). */
async function timed(
  rig: ChangeRig,
  clock: CommitLog | null,
  write: () => void,
  i: number,
  ip: string,
  into: Timed,
): Promise<void> {
  const from = clock?.commits.length ?? 0, faults = treeStat(rig.pid).faults, t = now();
  write();
  into.traffic.push(await rig.net.prober.latency(target(i), ip, t));
  into.faults.push(treeStat(rig.pid).faults - faults);
  const c = await clock?.waitFor(from, (c) => c.t >= t && c.elements > 0, 5000);
  if (c !== undefined) into.commit.push(c.t - t);
}

/** The p50, max and every latency of one kind of change, as a result line. */
function latencyLine(bench: string, size: Size, lat: Timed): Record<string, unknown> {
  return {
    bench,
    ...size,
    p50ms: round(quantile(lat.traffic, 0.5)),
    maxms: round(Math.max(...lat.traffic)),
    n: lat.traffic.length,
    allms: lat.traffic.map(round),
    faults: lat.faults,
    ...(lat.commit.length > 0
      ? {
        commitP50ms: round(quantile(lat.commit, 0.5)),
        commitMaxms: round(Math.max(...lat.commit)),
        commitAllms: lat.commit.map(round),
      }
      : {}),
  };
}
