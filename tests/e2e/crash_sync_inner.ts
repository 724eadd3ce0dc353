/**
 * Crashes mid-sync, inner half: runs INSIDE the node namespace tests/e2e/crash_sync_test.ts made
 * (KNP_IN_TEST_NETNS=1), with the scale harness of tests/bench/agent (fake API server holding N
 * Services × E endpoints, AnyIP backends, a prober in a client namespace).
 *
 * The agent is SIGKILLed at observed points of its work, never by timers alone: before its first
 * transaction (its "Informer synced" log line), right after the first one (`nft monitor` sees the
 * table appear), between the cold start's transactions and between those of the fresh-generation
 * sync a restart runs (the dispatch map holds some frontends, not all), and around a partial sync
 * of 2000 changed Services. After each kill the kernel's table is read back: every frontend must be
 * whole (its class chain present, every bucket present, exactly its endpoints, old or new). Each
 * restart must converge within one sync (checked with the agent stopped right after its first
 * sync), and Services programmed before a kill must keep answering throughout (zero failed probes).
 * Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { run } from "../netns.ts";
import {
  clusterIP,
  endpointIP,
  initialEndpoints,
  node,
  NODE_NAME,
  service,
  SERVICE_PORT,
  serviceCIDR,
  slice,
  TARGET_PORT,
} from "../support/cluster.ts";
import { BenchNet } from "../support/net.ts";
import { AgentProcess } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import { programmedFrontends } from "./fixtures/programmed_frontends.ts";
import { NftablesMonitor } from "../../ffi/nftables/netlink/monitor.ts";

if (Deno.env.get("KNP_IN_TEST_NETNS") !== "1") {
  throw new Error("crash_sync_inner.ts programs the kernel: run it through crash_sync_test.ts");
}

const N = 4800, E = 16, CHANGED = 2000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Endpoint IPs of service i: `shift` 0 for the initial set, 8000 for the changed one. */
function eps(i: number, shift: number): string[] {
  return initialEndpoints(i, E).map((_, j) => endpointIP(i * E + j + shift));
}

/** The frontends of service i (ClusterIP, and NodePort for one in 20) with their endpoints. */
function frontendsOf(i: number, shift: number): [string, string[]][] {
  const svc = service(i) as { spec: { ports: { nodePort?: number }[] } };
  const want = eps(i, shift).map((ip) => `${ip}:${TARGET_PORT}`).sort();
  const out: [string, string[]][] = [[`${clusterIP(i)} . tcp . ${SERVICE_PORT}`, want]];
  const np = svc.spec.ports[0].nodePort;
  if (np) out.push([`tcp . ${np}`, want]);
  return out;
}

/** Frontends per service with the endpoint sets each may have (old and new while changing). */
function expected(shifts: (i: number) => number[]): Map<string, string[][]> {
  const m = new Map<string, string[][]>();
  for (let i = 0; i < N; i++) {
    for (const s of shifts(i)) {
      for (const [key, want] of frontendsOf(i, s)) m.set(key, [...(m.get(key) ?? []), want]);
    }
  }
  return m;
}

/**
 * Reads the table and checks every frontend in it is whole and has one of its allowed endpoint
 * sets; with `all`, that every expected frontend is there. Returns the programmed frontends.
 */
async function checkTable(
  what: string,
  allowed: Map<string, string[][]>,
  all: boolean,
): Promise<Map<string, string[]>> {
  const p = await programmedFrontends();
  assert.deepEqual(p.problems.slice(0, 5), [], `${what}: half-programmed frontends`);
  const wrong: string[] = [];
  for (const [key, got] of p.frontends) {
    const ok = allowed.get(key);
    if (!ok) wrong.push(`${key}: not a Service's frontend`);
    else if (!ok.some((w) => w.join() === got.join())) wrong.push(`${key}: ${got.join(",")}`);
  }
  assert.deepEqual(wrong.slice(0, 5), [], `${what}: frontends with wrong endpoints`);
  if (all) {
    const missing = [...allowed.keys()].filter((k) => !p.frontends.has(k));
    assert.deepEqual(missing.slice(0, 5), [], `${what}: frontends missing after one sync`);
  }
  return p.frontends;
}

/** Frontends dispatched to class chains: elements of every class set (0 without a table). */
async function dispatchCount(): Promise<number> {
  return (await classSetElements()).length;
}

/** One entry per element of the class chains' frontends sets, each with its set's name. */
async function classSetElements(): Promise<string[]> {
  // One listing: `list sets` prints every set with its elements (each has a comment).
  const r = await run(["nft", "list", "sets", "ip"], { check: false });
  const out: string[] = [];
  for (const block of r.code === 0 ? r.stdout.split(/\n\s*set /) : []) {
    const name = /^(frontends-\S+) \{/.exec(block)?.[1];
    if (name === undefined) continue;
    for (const _ of block.matchAll(/comment "/g)) out.push(`${name} `);
  }
  return out;
}

/**
 * ClusterIPs dispatched to class chains of generation `gen`: every Service has E endpoints, so
 * they are the elements of one class set (listing that set alone stays quick while the agent
 * writes; a listing of every set is redone each time a write interrupts it).
 */
async function inGeneration(gen: number): Promise<number> {
  const set = `frontends-dnat-tcp-${E}${gen === 0 ? "" : `-g${gen}`}`;
  const r = await run(["nft", "list", "set", "ip", "kube-proxy", set], { check: false });
  return r.code === 0 ? (r.stdout.match(/ comment "/g) ?? []).length : 0;
}

async function deleteTable(): Promise<void> {
  await run(["nft", "delete", "table", "ip", "kube-proxy"], { check: false });
}

/** What the steps share; `start` replaces the agent, `step` stops the test at a failed step. */
interface Ctx {
  aut: ReturnType<typeof startAgent>;
  api: ReturnType<typeof startAgent>["api"];
  net: BenchNet;
  agent: AgentProcess | undefined;
  start: () => AgentProcess;
  kill: () => Promise<void>;
  step: (name: string, fn: () => Promise<void>) => Promise<void>;
}

/**
 * Kills the agent between two transactions of a chunked full sync: a full sync writes
 * Services in list order, a whole Service per transaction, ~2650 of them in each here. Once
 * `count` (a cheap listing) is past 0 and short of all, the first transaction is in and the
 * next one 0.1-0.4 s away (the caller checks that the kill came in time). Returns false when a
 * poll came too late (the sync had finished).
 */
async function killMidway(ctx: Ctx, count: () => Promise<number>): Promise<boolean> {
  for (let k = 0; k < 3000; k++) {
    const n = await count();
    if (n >= N) return false;
    if (n > 0) {
      await ctx.kill();
      return true;
    }
    await sleep(2);
  }
  throw new Error("the sync never started");
}

/**
 * Starts the agent and stops it as soon as the kernel reports its first commit adding elements
 * to `set`: SIGSTOP at once (a transaction already in the kernel still completes), then SIGKILL.
 * The agent encodes its next transaction only after that commit's ack, ~0.05 s; polling with
 * `nft list`, or reading `nft monitor`, reacted too late.
 */
async function killAtFirstElements(ctx: Ctx, set: string): Promise<void> {
  const mon = new NftablesMonitor();
  let agent: AgentProcess | undefined;
  const seen = new Promise<void>((resolve) => {
    const stop = () => {
      if (agent !== undefined) Deno.kill(agent.pid, "SIGSTOP");
      resolve();
    };
    mon.start({
      onForeign: (msgs) => {
        if (msgs.some((m) => m.kind === "element" && m.name === set)) stop();
      },
      onOverrun: stop, // only a transaction of thousands of elements overruns it
    });
  });
  try {
    agent = ctx.start();
    await seen;
    await ctx.kill();
  } finally {
    await mon.stop();
  }
}

/** After a restart: stops the agent right after its first sync, checks, lets it go on. */
async function firstSync(ctx: Ctx, what: string, allowed: Map<string, string[][]>): Promise<void> {
  const agent = ctx.agent!;
  const from = agent.lines.length;
  await agent.waitForLine(/SyncProxyRules complete.*ipFamily="IPv4"/, 60_000, from);
  Deno.kill(agent.pid, "SIGSTOP");
  try {
    await checkTable(`${what}, after the first sync`, allowed, true);
  } finally {
    Deno.kill(agent.pid, "SIGCONT");
  }
}

/** Killed before the first transaction, right after it, and between the cold start's transactions. */
async function coldStartSteps(ctx: Ctx): Promise<Map<string, string[]>> {
  const { start, kill, step } = ctx;
  const initial = expected(() => [0]);
  let programmed = new Map<string, string[]>();
  await step("killed before its first transaction: no table", async () => {
    await deleteTable();
    start();
    await ctx.agent!.waitForLine(/Informer synced.*resource="endpointslices"/, 60_000);
    await kill();
    assert.equal(await dispatchCount(), 0);
    const chains = await run(["nft", "list", "chains", "ip"]);
    assert.doesNotMatch(chains.stdout, /kube-proxy/, "a transaction ran before the kill");
  });

  await step("killed right after its first transaction: skeleton only", async () => {
    const mon = new Deno.Command("nft", {
      args: ["monitor", "new", "tables"],
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const reader = mon.stdout.pipeThrough(new TextDecoderStream()).getReader();
    start();
    let seen = "";
    while (!/add table ip kube-proxy/.test(seen)) {
      const { value, done } = await reader.read();
      if (done) throw new Error("nft monitor ended");
      seen += value;
    }
    await kill();
    mon.kill("SIGTERM");
    await mon.status;
    const frontends = await checkTable("skeleton only", initial, false);
    assert.equal(frontends.size, 0, "elements were written before the kill");
    assert.match((await run(["nft", "list", "chains", "ip"])).stdout, /chain services/);
  });

  await step("killed between the cold start's transactions", async () => {
    for (let attempt = 0;; attempt++) {
      await deleteTable();
      await killAtFirstElements(ctx, "cluster-ips");
      programmed = await checkTable("cold start cut short", initial, false);
      // The next transaction may already be in the kernel when the kill lands.
      console.log(
        `    attempt ${attempt}: ${programmed.size} of ${initial.size} frontends written`,
      );
      if (programmed.size < initial.size) break;
      assert.ok(attempt < 5, "never caught the cold start between two transactions");
    }
    assert.ok(programmed.size > 0, `${programmed.size}`);
    console.log(`    caught with ${programmed.size} of ${initial.size} frontends written`);
  });
  return programmed;
}

/** Killed between a regeneration's transactions, then a restart that converges; trace and explain. */
async function regenerationSteps(ctx: Ctx, programmed: Map<string, string[]>): Promise<void> {
  const { net, start, kill, step } = ctx;
  const initial = expected(() => [0]);
  await step("killed between the restart's fresh-generation transactions", async () => {
    // Each restart moves to a new generation (1, 2, ...): catch one between transactions.
    let gen = 1;
    for (;; gen++) {
      start();
      if (await killMidway(ctx, () => inGeneration(gen))) break;
      await kill();
      assert.ok(gen < 4, "never caught a regeneration between two transactions");
    }
    const now = await checkTable("regeneration cut short", initial, false);
    console.log(`    caught with ${await inGeneration(gen)} of ${N} ClusterIPs re-pointed`);
    const lost = [...programmed.keys()].filter((k) => !now.has(k));
    assert.deepEqual(lost.slice(0, 5), [], "frontends programmed before were dropped");
  });

  await step("a restart converges within one sync; no probe failed", async () => {
    start();
    await firstSync(ctx, "after two kills", initial);
    const w = await net.prober.send({ op: "unwatch" });
    assert.equal(w.failures, 0, `failed probes: ${JSON.stringify(w)}`);
    assert.ok(Number(w.probes) > 50, `only ${w.probes} probes`);
  });

  await step("trace and explain on this table answer in seconds", async () => {
    // Each `get element` or `list chain` through libnftables 1.0.6 loads every element of
    // the table first (~2 s here): a trace made of ~40 of them took nearly two minutes.
    const i = N - 1, t0 = performance.now();
    const tr = await AgentProcess.run([
      "trace",
      "--from",
      "198.18.3.2",
      "--to",
      `${clusterIP(i)}:${SERVICE_PORT}/tcp`,
    ]);
    const traceMs = performance.now() - t0;
    assert.equal(tr.code, 0, tr.output);
    for (const ip of eps(i, 0)) assert.ok(tr.output.includes(`${ip}:${TARGET_PORT}`), ip);
    const t1 = performance.now();
    const ex = await AgentProcess.run(["explain", `ns${i % 100}/svc-${i}`]);
    const explainMs = performance.now() - t1;
    assert.equal(ex.code, 0, ex.output);
    console.log(`    trace ${Math.round(traceMs)} ms, explain ${Math.round(explainMs)} ms`);
    assert.ok(traceMs < 20_000 && explainMs < 20_000, "trace or explain took over 20 s");
  });
}

/** Services changed, and the agent killed 0, 150 and 400 ms later. */
async function changeSteps(ctx: Ctx): Promise<void> {
  const { api, net, start, kill, step } = ctx;
  let shift = 0; // each round flips the changed Services between two endpoint sets
  for (const delay of [0, 150, 400]) {
    await step(`${CHANGED} Services changed, killed ${delay} ms later`, async () => {
      // Unchanged Services (the last ones) must answer throughout.
      const unchanged = Array.from({ length: 40 }, (_, k) => N - 1 - k * 7)
        .map((i) => `${clusterIP(i)}:${SERVICE_PORT}`);
      await net.prober.send({ op: "watch", targets: unchanged });
      const now = shift, next = 8000 - shift;
      shift = next;
      for (let i = 0; i < CHANGED; i++) {
        api.apply(slice(i, eps(i, next).map((ip) => ({ ip }))));
      }
      await sleep(delay);
      await kill();
      const during = expected((i) => (i < CHANGED ? [now, next] : [0]));
      const cut = await checkTable("partial sync cut short", during, false);
      const moved = Array.from({ length: CHANGED }, (_, i) => frontendsOf(i, next)[0])
        .filter(([key, want]) => cut.get(key)?.join() === want.join()).length;
      console.log(`    caught with ${moved} of ${CHANGED} changed Services written`);
      start();
      await firstSync(
        ctx,
        "after a kill mid-change",
        expected((i) => (i < CHANGED ? [next] : [0])),
      );
      const w = await net.prober.send({ op: "unwatch" });
      assert.equal(w.failures, 0, `failed probes: ${JSON.stringify(w)}`);
    });
  }
}

Deno.test({
  name: "crash mid-sync: SIGKILL at observed points, restart, converge within one sync",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const net = await BenchNet.create();
    const aut = startAgent({
      objects: [
        node(),
        serviceCIDR(),
        ...Array.from({ length: N }, (_, i) => [service(i), slice(i, initialEndpoints(i, E))])
          .flat(),
      ],
      bookmarkIntervalMs: 1000,
      nodeName: NODE_NAME,
      clusterCIDR: "198.18.1.0/24",
      minSyncPeriod: "200ms",
      args: ["--v=2"],
      deferStart: true,
    });
    const { api } = aut;
    const ctx: Ctx = {
      aut,
      api,
      net,
      agent: undefined,
      start: () => (ctx.agent = aut.start()),
      kill: async () => {
        const st = await ctx.agent!.stop("SIGKILL");
        assert.equal(st.signal, "SIGKILL", `the agent was not killed: ${JSON.stringify(st)}`);
      },
      step: async (name, fn) => {
        if (!(await t.step(name, fn))) throw new Error(`stopped after the failed step "${name}"`);
      },
    };
    try {
      const programmed = await coldStartSteps(ctx);
      // Services programmed before the kills, probed until the end of the cold-start steps.
      const sample = [...programmed.keys()].filter((k) => !k.startsWith("tcp")).slice(0, 40)
        .map((k) => `${k.split(" . ")[0]}:${SERVICE_PORT}`);
      assert.ok(sample.length > 0);
      await net.prober.send({ op: "watch", targets: sample });
      await regenerationSteps(ctx, programmed);
      await changeSteps(ctx);
    } catch (err) {
      console.error(`--- agent output (last lines) ---\n${ctx.agent?.tail(40)}`);
      throw err;
    } finally {
      await aut.close();
      await deleteTable();
      await net.close();
    }
  },
});
