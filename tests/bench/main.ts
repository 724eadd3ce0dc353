/**
 * `deno task bench`: the benchmark driver. Every benchmark runs in a child
 * Deno process inside a fresh network namespace (`ip netns exec`, with
 * KNP_IN_TEST_NETNS=1), never in the host's; the driver collects the JSON
 * lines the children print and prints a table.
 *
 * Flags: `--quick` (1k services only, for CI, < 3 min), `--soak` (the 5-minute
 * churn soak at 10k Services, alone), `--fuzz` (the long fuzzed-cluster-state run,
 * in memory and on the kernel, alone), `--only=a,b` with names from: agent,
 * sync, chunk, upstream, elements, conntrack, reconcile, localhost; `--sizes=30000x10,...`
 * keeps only the jobs of those sizes; `--json=FILE` also writes every result
 * line to FILE. Every run's lines also go to `.bench/<UTC time>.jsonl`, which
 * `deno task plot` draws by default.
 *
 * Needs root (network namespaces).
 *
 * @module
 */
import { denoBin, Netns, realKernelUnavailable, repoRoot } from "../netns.ts";

/** One benchmark child to run. */
interface Job {
  group: string;
  label: string;
  script: string;
  args: string[];
  timeoutSeconds: number;
}

/** A result line, with what the driver adds. */
type Line = Record<string, unknown> & { bench?: string; label?: string };

const UPSTREAM_CAP = 120;

function flag(name: string): string | undefined {
  const a = Deno.args.find((x) => x === `--${name}` || x.startsWith(`--${name}=`));
  if (a === undefined) return undefined;
  return a.includes("=") ? a.slice(a.indexOf("=") + 1) : "";
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Where a benchmark script lives. */
const bench = (f: string) => `${repoRoot}/tests/bench/${f}`;

/** The fuzzed-cluster-state runs: in memory, then on the kernel. */
function fuzzJobs(): Job[] {
  const f = bench("fuzz_bench.ts");
  const k = ["--kernel", "--seeds=10", "--steps=40"];
  return [
    { group: "fuzz", label: "fuzz", script: f, args: [], timeoutSeconds: 1800 },
    { group: "fuzz", label: "fuzz kernel", script: f, args: k, timeoutSeconds: 900 },
  ];
}

/** The end-to-end runs: the real agent, a fake API server, probes from another namespace. */
function agentJobs(quick: boolean, soak: boolean): Job[] {
  const agentSizes: [number, number, number][] = soak
    ? [[10000, 10, 300]]
    : quick
    ? [[1000, 10, 20]]
    : [[10000, 10, 60], [30000, 10, 60], [60000, 10, 60], [5000, 50, 60]];
  // The idle window: 5 minutes in the full plan, a short one in the CI variant (the path and the
  // foreign flush's repair, not the figure), none in the soak; KNP_BENCH_IDLE_SECONDS overrides.
  const idle = Number(
    Deno.env.get("KNP_BENCH_IDLE_SECONDS") ?? (soak ? 0 : quick ? 30 : 300),
  );
  // The big Deployment's rolling update (pods, at 20 a second): 10 s in the full plan, 3 s in
  // CI, none in the soak; KNP_BENCH_BIG_STEPS overrides. Its setup and teardown take ~10-30 s.
  const big = Number(Deno.env.get("KNP_BENCH_BIG_STEPS") ?? (soak ? 0 : quick ? 60 : 200));
  return agentSizes.map(([s, e, churn]) => ({
    group: soak ? "soak" : "agent",
    label: `agent ${s}x${e}`,
    script: bench("agent/agent_bench.ts"),
    args: ["--services", `${s}`, "--eps", `${e}`, "--churn-seconds", `${churn}`]
      .concat(["--idle-seconds", `${idle}`, "--big-steps", `${big}`])
      .concat(quick ? ["--settle-seconds", "10"] : []),
    timeoutSeconds: 300 + churn * 2 + s / 100 + idle + (big > 0 ? 60 + big / 20 : 0),
  }));
}

/** Our proxier's sync alone, and (full mode) one transaction without chunking. */
function syncJobs(quick: boolean): Job[] {
  const jobs: Job[] = [];
  const sizes: [number, number][] = quick
    ? [[1000, 10]]
    : [[1000, 10], [5000, 10], [10000, 10], [30000, 10], [5000, 50]];
  for (const [s, e] of sizes) {
    jobs.push({
      group: "sync",
      label: `ours ${s}x${e}`,
      script: bench("sync_bench.ts"),
      args: ["--services", String(s), "--eps", String(e)],
      timeoutSeconds: 600,
    });
  }
  if (!quick) {
    for (const [s, e] of [[10000, 10], [30000, 10]]) {
      jobs.push({
        group: "chunk",
        label: `ours ${s}x${e} one-tx`,
        script: bench("sync_bench.ts"),
        args: ["--services", String(s), "--eps", String(e), "--chunk", "0", "--no-concurrent"],
        timeoutSeconds: 600,
      });
    }
  }
  return jobs;
}

/** Upstream's ruleset layout applied with nft, capped at {@link UPSTREAM_CAP} seconds. */
function upstreamJobs(quick: boolean, notes: string[]): Job[] {
  const upstream: [number, number][] = quick ? [[1000, 10]] : [[1000, 10], [5000, 10], [10000, 10]];
  if (!quick) {
    notes.push(
      "upstream 30000x10 and 5000x50 are not attempted: the kernel cannot abort a running " +
        "batch (a killed process still holds the nftables mutex until it finishes), 10000x10 " +
        "already exceeds the cap and the cost grows super-linearly.",
    );
  }
  return upstream.map(([s, e]) => ({
    group: "upstream",
    label: `upstream ${s}x${e}`,
    script: bench("upstream_layout.ts"),
    args: ["--services", String(s), "--eps", String(e)],
    timeoutSeconds: UPSTREAM_CAP,
  }));
}

/** The single-script benchmarks; a missing script is a note, not a failure. */
function otherJobs(quick: boolean, notes: string[]): Job[] {
  const others: [string, string, string[]][] = [
    ["elements", "nft_elements_bench.ts", []],
    ["conntrack", "conntrack_bench.ts", quick ? ["20000"] : []],
    // The localhost NodePort proxy: bulk, request/response and 5k connections (real kernel).
    ["localhost", "localhost_bench.ts", []],
    ["reconcile", "conntrack_reconcile_bench.ts", quick ? ["fake"] : ["fake", "real"]],
  ];
  const jobs: Job[] = [];
  for (const [group, file, args] of others) {
    if (!exists(bench(file))) {
      notes.push(`${file} not present: skipped`);
      continue;
    }
    jobs.push({ group, label: group, script: bench(file), args, timeoutSeconds: 300 });
  }
  return jobs;
}

/** The benchmark plan for a mode. */
export function plan(quick: boolean, soak = false, fuzz = false): { jobs: Job[]; notes: string[] } {
  if (fuzz) return { jobs: fuzzJobs(), notes: [] };
  const notes: string[] = [];
  // End to end first.
  const jobs = agentJobs(quick, soak);
  if (soak) return { jobs, notes };
  jobs.push(...syncJobs(quick), ...upstreamJobs(quick, notes), ...otherJobs(quick, notes));
  return { jobs, notes };
}

/** Runs one job in a fresh namespace and returns its JSON lines. */
async function runJob(job: Job): Promise<{ lines: Line[]; error?: string; seconds: number }> {
  const ns = await Netns.create("bench");
  const t0 = performance.now();
  try {
    const child = ns.spawn([
      "env",
      "KNP_IN_TEST_NETNS=1",
      denoBin,
      "run",
      "-A",
      // The job holds the fake API server's whole cluster: no collection of its heap may stop
      // it for long while it times the agent (collectOwnGarbage in agent/measure.ts; at 60k a
      // compacting one held the big Deployment's writes ~0.3 s, docs/benchmarks.md ninth round).
      "--v8-flags=--max-old-space-size=4096,--expose-gc,--no-memory-reducer,--no-compact",
      job.script,
      ...job.args,
    ]);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
    }, job.timeoutSeconds * 1000);
    const out = await child.output();
    clearTimeout(timer);
    const seconds = (performance.now() - t0) / 1000;
    const text = new TextDecoder().decode(out.stdout);
    const lines: Line[] = [];
    for (const l of text.split("\n")) {
      const s = l.trim();
      if (!s.startsWith("{")) continue;
      try {
        lines.push({ ...JSON.parse(s), label: job.label });
      } catch {
        // not a result line
      }
    }
    if (timedOut) return { lines, error: `timeout: > ${job.timeoutSeconds} s`, seconds };
    if (out.code !== 0) {
      const err = new TextDecoder().decode(out.stderr).trim().split("\n").filter((l) =>
        l.trim() !== ""
      ).slice(-12).join(" | ");
      return { lines, error: `exit ${out.code}: ${err}`, seconds };
    }
    return { lines, seconds };
  } finally {
    await ns.delete();
  }
}

function fmt(v: unknown): string {
  if (typeof v === "number") {
    if (Number.isInteger(v)) return String(v);
    return v < 0.1 ? v.toFixed(4) : v < 10 ? v.toFixed(3) : v.toFixed(1);
  }
  return String(v);
}

/** Renders result lines as a text table. */
export function table(lines: Line[]): string {
  const skip = new Set(["bench", "label", "series"]);
  const rows = lines.map((l) => {
    const rest = Object.entries(l).filter(([k]) => !skip.has(k)).map(([k, v]) => `${k}=${fmt(v)}`);
    return [String(l.label ?? ""), String(l.bench ?? ""), rest.join(" ")];
  });
  const w0 = Math.max(5, ...rows.map((r) => r[0].length));
  const w1 = Math.max(5, ...rows.map((r) => r[1].length));
  return rows.map((r) => `${r[0].padEnd(w0)}  ${r[1].padEnd(w1)}  ${r[2]}`).join("\n");
}

/** Ours vs upstream cold sync, as ratios. */
export function ratios(lines: Line[], upstreamErrors: Map<string, string>): string[] {
  const out: string[] = [];
  const ours = lines.filter((l) => l.bench === "sync-cold" && l.chunk === "default");
  for (const o of ours) {
    const key = `${o.services}x${o.eps}`;
    const up = lines.find((l) => l.bench === "upstream-cold" && `${l.services}x${l.eps}` === key);
    const err = upstreamErrors.get(key);
    const s = o.seconds as number;
    if (up) {
      const u = up.seconds as number;
      out.push(
        `${key}: ours ${fmt(s)} s, upstream layout ${fmt(u)} s, ratio ${(u / s).toFixed(1)}x`,
      );
    } else if (err) {
      out.push(
        `${key}: ours ${fmt(s)} s, upstream layout ${err}, ratio > ${
          (UPSTREAM_CAP / s).toFixed(1)
        }x`,
      );
    } else {
      out.push(`${key}: ours ${fmt(s)} s, upstream layout not run`);
    }
  }
  return out;
}

if (import.meta.main) {
  const why = realKernelUnavailable();
  if (why !== undefined) {
    console.error(`bench: ${why}`);
    Deno.exit(2);
  }
  const quick = flag("quick") !== undefined;
  const only = flag("only")?.split(",").filter((x) => x !== "");
  const jsonFile = flag("json");
  const sizes = flag("sizes")?.split(",").filter((x) => x !== "");
  const { jobs, notes } = plan(quick, flag("soak") !== undefined, flag("fuzz") !== undefined);
  const all: Line[] = [];
  const upstreamErrors = new Map<string, string>();
  for (const job of jobs) {
    if (only && !only.includes(job.group)) continue;
    if (sizes && !sizes.some((z) => job.label.includes(z))) continue;
    console.error(`bench: ${job.label} ...`);
    const r = await runJob(job);
    for (const l of r.lines) all.push(l);
    if (r.error) {
      console.error(`bench: ${job.label}: ${r.error}`);
      all.push({ label: job.label, bench: "error", error: r.error });
      if (job.group === "upstream") {
        upstreamErrors.set(`${job.args[1]}x${job.args[3]}`, r.error.replace("timeout: ", ""));
      }
    }
    console.error(`bench: ${job.label} done in ${r.seconds.toFixed(1)} s`);
  }
  console.log(table(all));
  console.log("");
  for (const r of ratios(all, upstreamErrors)) console.log(r);
  for (const n of notes) console.log(`note: ${n}`);
  const jsonl = all.map((l) => JSON.stringify(l)).join("\n") + "\n";
  if (jsonFile) Deno.writeTextFileSync(jsonFile, jsonl);
  if (all.length > 0) {
    const stamp = new Date().toISOString().replace(/[:.]/g, "-");
    Deno.mkdirSync(`${repoRoot}/.bench`, { recursive: true });
    Deno.writeTextFileSync(`${repoRoot}/.bench/${stamp}.jsonl`, jsonl);
    console.log(`results: .bench/${stamp}.jsonl (deno task plot draws the newest)`);
  }
}
