/**
 * Crash during a conntrack reconcile, inner half: runs INSIDE the node namespace of a
 * {@link Topology} built by tests/e2e/crash_conntrack_test.ts (env KNP_TOPO; pods 0 and 1 run
 * echo servers "a" and "b" on TCP 8080 and UDP 5353).
 *
 * A UDP Service loses endpoint a while no agent runs, and ~100k UDP flows still point at a (one
 * of them real: a client that keeps its source port, as resolvers do), next to ~20k healthy flows
 * to b. The restarted agent's first conntrack reconcile has to delete them; it is SIGKILLed as
 * that reconcile starts, then again once deletions are under way (the namespace's conntrack count
 * starts to fall). The next agent must finish the job: every stale flow gone, every healthy one
 * kept, the real client moved to b. A TCP Service is probed all along and must never fail.
 * Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, repoRoot, run } from "../netns.ts";
import { Prober } from "../support/net.ts";
import { startPinger as startUdpPinger } from "./fixtures/udp_pinger_client.ts";
import { type AgentProcess, eventually } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import {
  attachTopology,
  node,
  reaches,
  service,
  serviceCIDR,
  slice,
  UDP,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/crash_conntrack_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.10", DNS = "198.19.0.53";
const STALE = 100_000, GOOD = 20_000;
const COUNT = "/proc/sys/net/netfilter/nf_conntrack_count";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Flows from made-up clients to the DNS Service, answered by `rsrc`, loaded with conntrack -R. */
async function loadFlows(first: number, n: number, rsrc: string): Promise<void> {
  const lines: string[] = [];
  for (let k = first; k < first + n; k++) {
    const s = k >> 8, sport = 20000 + (k & 255);
    const src = `198.18.${200 + (s >> 8)}.${s & 255}`;
    lines.push(
      `-I -p udp -s ${src} -d ${DNS} --sport ${sport} --dport 53 --reply-src ${rsrc} ` +
        `--reply-dst ${src} --reply-port-src ${UDP} --reply-port-dst ${sport} -t 600`,
    );
  }
  const file = await Deno.makeTempFile({ prefix: "knp-ct-", suffix: ".txt" });
  try {
    await Deno.writeTextFile(file, lines.join("\n") + "\n");
    await run(["conntrack", "-R", file]);
  } finally {
    await Deno.remove(file);
  }
}

/** UDP flows to the DNS Service answered by `rsrc` (with `madeUp`, only those loadFlows made). */
async function flowsTo(rsrc: string, madeUp = false): Promise<number> {
  const r = await run(
    ["conntrack", "-L", "-p", "udp", "--orig-dst", DNS, "--reply-src", rsrc],
    { check: false },
  );
  return r.stdout.split("\n").filter((l) =>
    l.startsWith("udp") && (!madeUp || /src=198\.18\.20[01]\./.test(l))
  ).length;
}

const count = () => Number(Deno.readTextFileSync(COUNT).trim());

/** A client in the client namespace sending from one source port, its replies recorded. */
const startPinger = (sport: number) => startUdpPinger(topo.client, DNS, 53, sport);

/** The TCP prober, run in the client namespace (tests/support/prober.ts). */
function startProber(): Prober {
  const proberChild = new Deno.Command("ip", {
    args: [
      "netns",
      "exec",
      topo.client.name,
      denoBin,
      "run",
      "-A",
      `${repoRoot}/tests/support/prober.ts`,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  return new Prober(proberChild);
}

/** What the steps share; `start` replaces the agent, `step` stops the test at a failed step. */
interface Ctx {
  aut: ReturnType<typeof startAgent>;
  api: ReturnType<typeof startAgent>["api"];
  prober: Prober;
  pinger: ReturnType<typeof startPinger>;
  agent: AgentProcess | undefined;
  start: () => AgentProcess;
  kill: () => Promise<void>;
  step: (name: string, fn: () => Promise<void>) => Promise<void>;
}

/** An agent programs the Services and a UDP flow; with the agent down, a leaves the Service and the flows pile up. */
async function seedSteps(ctx: Ctx): Promise<void> {
  const { aut, api, prober, pinger, start, kill, step } = ctx;
  await step("an agent programs the Services; a client's UDP flow goes to a", async () => {
    start();
    await aut.healthy();
    await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
    await eventually(
      "the pinger answered by a",
      () => pinger.fromSince("a", 0) > 3 || undefined,
    );
    await prober.send({ op: "watch", targets: [`${WEB}:80`] });
  });

  let before = 0;
  await step("while no agent runs: endpoint a leaves the Service, 120k flows", async () => {
    await kill();
    api.apply(slice("dns", [B], "UDP"));
    await loadFlows(0, STALE, A);
    await loadFlows(STALE, GOOD, B);
    before = count();
    assert.ok(before >= STALE + GOOD, `only ${before} conntrack entries`);
    assert.equal(await flowsTo(A, true), STALE, "the stale flows are not there");
    assert.equal(await flowsTo(B, true), GOOD, "the healthy flows are not there");
  });
}

/** Killed as the first reconcile starts, killed while it deletes; the next agent finishes. */
async function crashSteps(ctx: Ctx): Promise<void> {
  const { prober, pinger, start, kill, step } = ctx;
  await step("killed as its first reconcile starts", async () => {
    const t0 = count();
    start();
    await ctx.agent!.waitForLine(/SyncProxyRules complete.*ipFamily="IPv4"/, 30_000);
    await kill();
    console.log(`    conntrack entries: ${t0} before, ${count()} at the kill`);
  });

  let atKill = 0;
  await step("killed while the reconcile deletes", async () => {
    const t0 = count();
    start();
    for (let k = 0;; k++) {
      if (count() < t0 - 2000) break;
      if (k % 200 === 0) await sleep(1);
      if (k > 2_000_000) throw new Error("the reconcile never started deleting");
    }
    await kill();
    atKill = count();
    console.log(`    conntrack entries: ${t0} before, ${atKill} at the kill`);
    assert.ok(atKill > GOOD + 1000, "the reconcile had finished before the kill");
  });

  await step("the next agent finishes the job; nothing else was touched", async () => {
    const tRestart = Date.now();
    start();
    const done = await ctx.agent!.waitForLine(/Conntrack reconcile done.*ipFamily="IPv4"/, 30_000);
    const deleted = Number(/deleted=(\d+)/.exec(done.text)?.[1]);
    assert.ok(deleted > 0, done.text);
    assert.equal(await flowsTo(A), 0, "stale flows left");
    assert.equal(await flowsTo(B, true), GOOD, "healthy flows were deleted");
    // The client that kept its source port is answered by b now.
    await eventually(
      "the pinger moved to b",
      () => pinger.fromSince("b", tRestart) > 3 || undefined,
    );
    const w = await prober.send({ op: "unwatch" });
    assert.equal(w.failures, 0, `failed TCP probes: ${JSON.stringify(w)}`);
    assert.ok(Number(w.probes) > 50, `only ${w.probes} probes`);
  });
}

Deno.test({
  name: "crash during a conntrack reconcile: killed twice, the next agent finishes the job",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const aut = startAgent({
      objects: [
        node(),
        serviceCIDR(),
        service("web", { ip: WEB }),
        slice("web", [A, B]),
        service("dns", { ip: DNS, port: 53, protocol: "UDP" }),
        slice("dns", [A], "UDP"),
      ],
      bookmarkIntervalMs: 1000,
      minSyncPeriod: "200ms",
      args: ["--v=4"],
      deferStart: true,
    });
    const { api } = aut;

    const prober = startProber();
    const pinger = startPinger(40000);
    const ctx: Ctx = {
      aut,
      api,
      prober,
      pinger,
      agent: undefined,
      start: () => (ctx.agent = aut.start()),
      kill: async () => {
        const st = await ctx.agent!.stop("SIGKILL");
        assert.equal(st.signal, "SIGKILL", JSON.stringify(st));
      },
      step: async (name, fn) => {
        if (!(await t.step(name, fn))) throw new Error(`stopped after the failed step "${name}"`);
      },
    };
    try {
      await seedSteps(ctx);
      await crashSteps(ctx);
    } catch (err) {
      console.error(`--- agent output (last lines) ---\n${ctx.agent?.tail(40)}`);
      throw err;
    } finally {
      await aut.close();
      await pinger.stop();
      await prober.close();
      await run(["conntrack", "-F"], { check: false });
    }
  },
});
