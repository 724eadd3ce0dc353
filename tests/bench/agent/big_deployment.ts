/**
 * The big-Deployment phase of the end-to-end benchmark (agent_bench.ts; issue 21's last row):
 * one Service with 5000 ready endpoints in 50 EndpointSlices, then a rolling update of
 * `steps` pods at `rate` steps per second, timed to the kernel rather than to traffic.
 *
 * A step replaces one pod as the Deployment controller does with maxSurge 1 and
 * maxUnavailable 0, in three writes to the slice that holds it (slices in turn, round-robin):
 * the new pod turns ready (5001 endpoints), the old one starts terminating (ready false,
 * serving true: 5000 in use again), the old one is gone (no dataplane change). Writes are spaced
 * evenly, three per step.
 *
 * A monitor in a process of its own (commit_stamper.ts; the node namespace, none of the agent's
 * sockets known to it) sees every commit the agent makes: its element messages and its NEWGEN,
 * stamped there so that this process's own pauses do not count. A change
 * write is timed from the API write to the NEWGEN of the first commit after it that carries
 * elements and leaves the frontend in the class the write leads to (5001 or 5000 endpoints; a
 * batch of writes answers those up to the last whose class it leaves); kernel_commits.ts
 * attributes the commits. The Service is deleted at the end, so the churn phase after it runs
 * against the cluster it always had.
 *
 * @module
 */
import type { FakeApiServer } from "../../fakeapi/server.ts";
import {
  endpointIP,
  type Ep,
  service,
  SERVICE_PORT,
  serviceName,
  sliceNamed,
} from "../../support/cluster.ts";
import { type BenchNet, treeStat } from "../../support/net.ts";
import { now } from "../../support/prober.ts";
import { parseEndpointsMap } from "../../../proxier/nftables/names.ts";
import { attribute, type Commit, type Write } from "./kernel_commits.ts";
import { collectOwnGarbage, quantile, round, samples, sleep, target } from "./measure.ts";
import { stalls } from "./loop_stalls.ts";
import { CommitLog } from "./commit_log.ts";

/**
 * The big Service's ClusterIP: the last usable address of the ServiceCIDR, which clusterIP(i)
 * gives only to Service 65533; the caller keeps every other Service's index below that.
 */
export const BIG_CLUSTER_IP = "198.19.255.254";
const BIG_INDEX_CLASH = 65533;
const SLICES = 50, PER_SLICE = 100, ENDPOINTS = SLICES * PER_SLICE;
/** Distinct bulk endpoint addresses (cluster.ts's pool): the big Service's must not repeat. */
const ADDRESSES = 32_000;
const bigTarget = `${BIG_CLUSTER_IP}:${SERVICE_PORT}`;

/** What {@link bigDeployment} works on. */
export interface BigDeploymentOptions {
  /** The fake API server the writes go to. */
  api: FakeApiServer;
  /** The benchmark's network: its prober checks traffic before and after. */
  net: BenchNet;
  /** The cluster's size, copied into the result. */
  size: { services: number; eps: number };
  /** Pods replaced (three writes each). */
  steps: number;
  /** Steps per second. */
  rate: number;
  /** The big Service's index (its name and namespace); outside every other phase's. */
  index: number;
  /** Above every Service index the bench may use, the big one's aside (for the ClusterIP). */
  maxOtherIndex: number;
  /** The agent's pid (its process tree's CPU is read over the rolling update). */
  pid: number;
  /** The agent's /metrics URL (its event-loop stalls are read over the rolling update). */
  metrics: string;
  /** A Service never changed: it must still answer at the end. */
  unchanged: number;
  /** The agent's --min-sync-period as given, for the result line. */
  minSyncPeriod: string;
}

/** Whether a commit moved a frontend into (`new`) or out of (`del`) the class set of `n`. */
function classSet(c: Commit, n: number, op: "new" | "del"): boolean {
  const base = `frontends-dnat-tcp-${n}`;
  return Object.entries(c.names).some(([k, [a, d]]) =>
    (k === base || k.startsWith(`${base}-`)) && (op === "new" ? a : d) > 0
  );
}

/**
 * Bucket elements added minus deleted in the ClusterIP bucket maps of TCP by `commits`: the big
 * Service's are in `endpoints-large-tcp` (over 16 endpoints), any generation.
 */
function bucketBalance(commits: readonly Commit[]): number {
  let n = 0;
  for (const c of commits) {
    for (const [k, [a, d]] of Object.entries(c.names)) {
      const m = parseEndpointsMap(k);
      if (m !== undefined && !m.nodePort && m.proto === "tcp") n += a - d;
    }
  }
  return n;
}

/** The Deployment's slices and the address counter of its new pods. */
interface Deployment {
  slices: Ep[][];
  next: () => string;
}

/** 50 slices of 100 ready pods, addresses counted from bulk address `firstAddress`. */
function deployment(firstAddress: number): Deployment {
  let k = firstAddress;
  const next = () => endpointIP(k++);
  const slices = Array.from(
    { length: SLICES },
    () => Array.from({ length: PER_SLICE }, () => ({ ip: next() })),
  );
  return { slices, next };
}

/** One of a step's writes: which slice, and whether the dataplane must change. */
type Kind = "ready" | "terminating" | "gone";
const KINDS: Kind[] = ["ready", "terminating", "gone"];

/** The class (endpoints in use) each kind of write leads to; none for the one that changes nothing. */
const STATE: Record<Kind, number | undefined> = {
  ready: ENDPOINTS + 1,
  terminating: ENDPOINTS,
  gone: undefined,
};

/** Sets each commit's state: the class of the frontend after it, moved by class-set adds. */
function trackClass(commits: readonly Commit[], initial: number): void {
  let cls = initial;
  for (const c of commits) {
    for (const [k, [added]] of Object.entries(c.names)) {
      const m = /^frontends-dnat-tcp-(\d+)(?:-g\d+)?$/.exec(k);
      if (m && added > 0) cls = Number(m[1]);
    }
    c.state = cls;
  }
}

/** Applies write `kind` of step `step` to the Deployment's state; returns its slice. */
function rollingWrite(d: Deployment, step: number, kind: Kind): number {
  const k = step % SLICES, eps = d.slices[k];
  // New pods are appended and the oldest is first: eps[0] is the pod this step replaces.
  if (kind === "ready") eps.push({ ip: d.next() });
  else if (kind === "terminating") {
    eps[0] = { ip: eps[0].ip, ready: false, serving: true, terminating: true };
  } else eps.shift();
  return k;
}

/** Creates the Service (slices first) and waits until its frontend is in the kernel and quiet. */
async function create(o: BigDeploymentOptions, d: Deployment, log: CommitLog) {
  d.slices.forEach((eps, k) => o.api.apply(sliceNamed(o.index, eps, `${k}`)));
  await sleep(200); // the slices reach the agent before the Service that makes them count
  const from = log.commits.length, t = now();
  o.api.apply(service(o.index, BIG_CLUSTER_IP));
  const done = await log.waitFor(from, (c) => classSet(c, ENDPOINTS, "new"), 120_000);
  await log.quiet(2000, 30_000); // stale classes of partial counts go 1 s after
  const commits = log.commits.slice(from);
  await o.net.prober.send({ op: "all", targets: [bigTarget], timeoutMs: 10_000 });
  return {
    createToKernelMs: round(done.t - t),
    createCommits: commits.length,
    createElements: commits.reduce((s, c) => s + c.elements, 0),
    bucketsAfterCreate: bucketBalance(commits),
  };
}

/** The rolling update: 3 × steps writes at 3 × rate per second; the writes as made. */
async function rollingUpdate(o: BigDeploymentOptions, d: Deployment, steps: number) {
  const writes: (Write & { step: number; kind: Kind })[] = [];
  const interval = 1000 / (3 * o.rate);
  const t0 = now() + 10;
  let lagMax = 0;
  for (let j = 0; j < 3 * steps; j++) {
    const due = t0 + j * interval;
    if (due - now() > 1) await sleep(due - now());
    lagMax = Math.max(lagMax, now() - due);
    const step = Math.floor(j / 3), kind = KINDS[j % 3];
    const k = rollingWrite(d, step, kind);
    const obj = sliceNamed(o.index, d.slices[k], `${k}`);
    const t = now();
    o.api.apply(obj);
    writes.push({ t, expectsChange: kind !== "gone", state: STATE[kind], step, kind });
  }
  return { writes, interval, lagMax };
}

/** The p50 and max of `xs`, rounded. */
const p50max = (xs: number[]) => ({ p50: round(quantile(xs, 0.5)), max: round(Math.max(...xs)) });

/** The result line's figures from the writes and the commits attributed to them. */
function summarize(
  writes: (Write & { step: number; kind: Kind })[],
  commits: readonly Commit[],
  end: number,
) {
  trackClass(commits, ENDPOINTS);
  const a = attribute(writes, commits, end);
  const lat = (kind?: Kind) =>
    writes.flatMap((w, j) =>
      (kind === undefined || w.kind === kind) && a.outcomes[j].toKernelMs !== undefined
        ? [a.outcomes[j].toKernelMs!]
        : []
    );
  const all = lat(), ready = p50max(lat("ready")), term = p50max(lat("terminating"));
  const perStep: number[] = [];
  writes.forEach((w, j) => perStep[w.step] = (perStep[w.step] ?? 0) + a.outcomes[j].elements);
  const elementsOf = (kind: Kind) =>
    p50max(writes.flatMap((w, j) => w.kind === kind ? [a.outcomes[j].elements] : []));
  const t0 = writes[0]?.t ?? 0;
  return {
    toKernelP50ms: round(quantile(all, 0.5)),
    toKernelP99ms: round(quantile(all, 0.99)),
    toKernelMaxms: round(Math.max(...all)),
    toKernelOver10ms: all.filter((x) => x > 10).length,
    changeWrites: all.length + a.unanswered,
    readyP50ms: ready.p50,
    readyMaxms: ready.max,
    terminatingP50ms: term.p50,
    terminatingMaxms: term.max,
    // Under batching (shared commits) a commit's elements go to the first write it answers.
    commits: commits.filter((c) => c.t < end && c.t >= t0).length,
    elementsTotal: perStep.reduce((x, y) => x + y, 0),
    elementsPerStepP50: quantile(perStep, 0.5),
    elementsPerStepMax: Math.max(...perStep),
    elementsReadyP50: elementsOf("ready").p50,
    elementsTerminatingP50: elementsOf("terminating").p50,
    noChangeWrites: writes.filter((w) => !w.expectsChange).length,
    commitsForNoChangeWrites: a.noChangeCommits,
    elementsForNoChangeWrites: a.noChangeElements,
    ...(a.noChangeExamples.length > 0 ? { noChangeExamples: a.noChangeExamples } : {}),
    sharedCommits: a.sharedCommits,
    sharedWrites: a.outcomes.filter((x) => x.shared).length,
    lateCommits: a.lateCommits,
    lateWrites: a.outcomes.filter((x) => x.late).length,
    extraCommits: a.extraCommits,
    unanswered: a.unanswered,
    series: {
      toKernelMs: writes.flatMap((w, j) => {
        const ms = a.outcomes[j].toKernelMs;
        return ms === undefined ? [] : [[round((w.t - t0) / 1000), round(ms), w.kind]];
      }),
      elementsPerStep: perStep,
    },
  };
}

/**
 * When the last write's window closes: one write interval after it, or later when the commit
 * carrying the last change write came later (up to 5 s: at --min-sync-period 1 s, or batched
 * with another write so that nothing moved).
 */
async function windowEnd(
  log: CommitLog,
  from: number,
  writes: readonly Write[],
  interval: number,
): Promise<number> {
  const last = writes[writes.length - 1].t + interval;
  const change = writes.findLast((w) => w.expectsChange);
  let answered = 0;
  if (change !== undefined) {
    const reaches = (c: Commit) => change.state === undefined || classSet(c, change.state, "new");
    const c = await log.waitFor(from, (c) => c.t >= change.t && c.elements > 0 && reaches(c), 5000)
      .catch(() => undefined);
    answered = c === undefined ? now() : c.t + 0.001;
  }
  if (last > now()) await sleep(last - now());
  return Math.max(last, answered);
}

/** Whether the big Service and the unchanged one answer; the error if not. */
async function traffic(o: BigDeploymentOptions): Promise<Record<string, unknown>> {
  try {
    await o.net.prober.send({
      op: "all",
      targets: [bigTarget, target(o.unchanged)],
      timeoutMs: 10_000,
    });
    return { trafficOk: true };
  } catch (e) {
    return { trafficOk: false, trafficError: String(e) };
  }
}

/** Deletes the Service and its slices; waits until its frontend left the kernel and quiet. */
async function remove(o: BigDeploymentOptions, log: CommitLog): Promise<number> {
  const { namespace, name } = serviceName(o.index);
  const from = log.commits.length, t = now();
  o.api.remove("Service", namespace, name);
  for (let k = 0; k < SLICES; k++) o.api.remove("EndpointSlice", namespace, `${name}-${k}`);
  const done = await log.waitFor(from, (c) => classSet(c, ENDPOINTS, "del"), 60_000);
  await log.quiet(2000, 30_000);
  return round(done.t - t);
}

/**
 * Runs the phase and returns its `agent-big-deployment` line (with `error` set, and the rest
 * left out, when the Service never reached the kernel).
 */
export async function bigDeployment(o: BigDeploymentOptions): Promise<Record<string, unknown>> {
  if (o.maxOtherIndex >= BIG_INDEX_CLASH) {
    throw new Error(`big deployment: Service index ${BIG_INDEX_CLASH} would share its ClusterIP`);
  }
  const steps = Math.min(o.steps, ADDRESSES - ENDPOINTS);
  const head = {
    bench: "agent-big-deployment",
    ...o.size,
    endpoints: ENDPOINTS,
    slices: SLICES,
    steps,
    rate: o.rate,
    minSyncPeriod: o.minSyncPeriod,
  };
  const log = await CommitLog.open();
  try {
    const d = deployment(o.size.services * o.size.eps);
    let created;
    try {
      created = await create(o, d, log);
    } catch (e) {
      return { ...head, error: `the big Service never settled in the kernel: ${e}` };
    }
    await collectOwnGarbage();
    const from = log.commits.length, cpu0 = treeStat(o.pid).cpuSeconds;
    const m0 = await samples(o.metrics);
    const { writes, interval, lagMax } = await rollingUpdate(o, d, steps);
    const end = await windowEnd(log, from, writes, interval);
    const cpu = treeStat(o.pid).cpuSeconds - cpu0;
    const loop = stalls(m0, await samples(o.metrics));
    const after = await traffic(o);
    const commits = log.commits.slice(from);
    const bucketsAtEnd = created.bucketsAfterCreate +
      bucketBalance(commits.filter((c) => c.t < end));
    return {
      ...head,
      ...summarize(writes, commits, end),
      seconds: round((end - writes[0].t) / 1000),
      cpuShare: Math.round((cpu / ((end - writes[0].t) / 1000)) * 100) / 100,
      // For reading the agent's log beside the series (its times are from the first write).
      startedAt: new Date(writes[0].t).toISOString(),
      scheduleLagMaxms: round(lagMax),
      // Was the agent's own loop held up (a burst of slow writes with none here is not its)?
      agentStallsOver50ms: loop.stallsOver50ms,
      agentLongestStallUnderS: loop.longestStallUnderS,
      ...created,
      bucketsAtEnd,
      ...after,
      removedToKernelMs: await remove(o, log),
      overruns: log.overruns,
    };
  } finally {
    await log.stop();
  }
}
