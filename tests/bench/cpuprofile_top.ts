/**
 * The top frames of a V8 `.cpuprofile` (what `--cpu-prof` writes), by self time, as text: for
 * docs/benchmarks.md and for deciding what to optimise. Optionally only a time window of the
 * run, only the samples whose stack passes through a function, or none that pass through another.
 *
 * Usage: deno run -R tests/bench/cpuprofile_top.ts FILE [--top=N] [--last=SECONDS]
 *        [--skip-last=SECONDS] [--within=REGEX] [--without=REGEX] [--inclusive]
 * - `--last=S`: only the last S seconds of the run (e.g. the bench's change phase); `--skip-last`
 *   leaves out the final seconds (the shutdown);
 * - `--within=RE`: only samples with a frame whose function name matches RE (e.g. "planPartial");
 * - `--without=RE`: drop samples with such a frame (e.g. "planFull|buildAll|readKernelView");
 * - `--inclusive`: rank by total (self plus callees) time instead.
 *
 * A sample counts at most twice the median sampling interval: on a loaded machine a thread
 * descheduled between two samples otherwise charges the whole wait to one frame.
 *
 * @module
 */

/** One node of a `.cpuprofile`'s call tree. */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** A `.cpuprofile` file. */
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A frame's name as printed: function, file and line. */
export function frameName(n: ProfileNode): string {
  const f = n.callFrame;
  const file = f.url.replace(/^.*\/(main|node_modules)\//, "").replace(/^file:\/\//, "");
  return `${f.functionName || "(anonymous)"} ${file}:${f.lineNumber + 1}`;
}

/** Self (or inclusive) milliseconds per frame name over the selected samples, highest first. */
export function topFrames(
  p: CpuProfile,
  opts: {
    last?: number;
    skipLast?: number;
    within?: RegExp;
    without?: RegExp;
    inclusive?: boolean;
  },
): { rows: [string, number][]; totalMs: number } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stack = (id: number) => {
    const out: ProfileNode[] = [];
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) out.push(byId.get(x)!);
    return out;
  };
  const end = (p.endTime - p.startTime) / 1000 - (opts.skipLast ?? 0) * 1000;
  const start = opts.last === undefined ? -Infinity : end - opts.last * 1000;
  const ms = new Map<string, number>();
  const sorted = [...p.timeDeltas].sort((a, b) => a - b);
  const cap = 2 * (sorted[sorted.length >> 1] ?? 0) / 1000;
  let t = 0, total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] / 1000;
    const dt = Math.min(cap, (p.timeDeltas[i + 1] ?? 0) / 1000);
    if (t < start || t > end) continue;
    const s = stack(p.samples[i]);
    const names = s.map((n) => n.callFrame.functionName);
    if (opts.within && !names.some((n) => opts.within!.test(n))) continue;
    if (opts.without && names.some((n) => opts.without!.test(n))) continue;
    if (s[0].callFrame.functionName === "(idle)") continue;
    total += dt;
    const counted = opts.inclusive ? new Set(s.map(frameName)) : [frameName(s[0])];
    for (const k of counted) ms.set(k, (ms.get(k) ?? 0) + dt);
  }
  return { rows: [...ms].sort((a, b) => b[1] - a[1]), totalMs: total };
}

function flag(name: string): string | undefined {
  const a = Deno.args.find((x) => x.startsWith(`--${name}=`) || x === `--${name}`);
  return a === undefined ? undefined : a.includes("=") ? a.slice(a.indexOf("=") + 1) : "";
}

if (import.meta.main) {
  const file = Deno.args.find((a) => !a.startsWith("--"));
  if (file === undefined) {
    console.error("usage: cpuprofile_top.ts FILE [--top=N] [--last=S] [--within=RE] ...");
    Deno.exit(2);
  }
  const p = JSON.parse(Deno.readTextFileSync(file)) as CpuProfile;
  const num = (s: string | undefined) => (s === undefined ? undefined : Number(s));
  const re = (s: string | undefined) => (s === undefined ? undefined : new RegExp(s));
  const { rows, totalMs } = topFrames(p, {
    last: num(flag("last")),
    skipLast: num(flag("skip-last")),
    within: re(flag("within")),
    without: re(flag("without")),
    inclusive: flag("inclusive") !== undefined,
  });
  console.log(`busy ${totalMs.toFixed(0)} ms in the selected samples`);
  for (const [name, t] of rows.slice(0, num(flag("top")) ?? 15)) {
    console.log(
      `${t.toFixed(1).padStart(9)} ms ${(100 * t / totalMs).toFixed(1).padStart(5)}%  ${name}`,
    );
  }
}
