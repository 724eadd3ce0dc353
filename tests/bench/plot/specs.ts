/**
 * Bench results → Vega-Lite specs, for `deno task plot` (tests/bench/plot.ts). Pure: no I/O and
 * no Vega here, so the data-to-spec step is unit-tested without rendering anything.
 *
 * Input: the JSON lines `deno task bench` writes (one object per line with `bench` and `label`);
 * several runs of the same size are drawn as their median with a min-max bar.
 *
 * @module
 */

/** One result line of `deno task bench` (what a child printed, plus the driver's `label`). */
export type Line = Record<string, unknown> & { bench?: string; label?: string };

/** A Vega-Lite spec, kept loose here; plot.ts hands it to the compiler. */
export type Spec = Record<string, unknown>;

/** A named plot: written to `<name>.svg`. */
export interface Plot {
  name: string;
  spec: Spec;
}

/** One aggregated point: the median of the runs at this size, and their range. */
export interface Point {
  services: number;
  series: string;
  value: number;
  lo: number;
  hi: number;
  runs: number;
}

const WIDTH = 560, HEIGHT = 280;
const LOG_Y = { type: "log", nice: false, padding: 12 };
const CONFIG = {
  aria: false,
  font: "Helvetica, Arial, sans-serif",
  title: { fontSize: 15, anchor: "start", subtitleFontSize: 12, subtitleColor: "#555" },
  axis: { labelFontSize: 12, titleFontSize: 13, grid: true, gridColor: "#eee" },
  legend: {
    labelFontSize: 12,
    titleFontSize: 12,
    labelLimit: 400,
    orient: "bottom",
    direction: "vertical",
  },
  view: { stroke: "#ccc" },
};

/** Parses the bench's JSON lines (or a JSON array of lines); blank and non-JSON lines are skipped. */
export function parseLines(text: string): Line[] {
  const t = text.trim();
  if (t.startsWith("[")) return JSON.parse(t) as Line[];
  const out: Line[] = [];
  for (const l of t.split("\n")) {
    const s = l.trim();
    if (!s.startsWith("{")) continue;
    try {
      out.push(JSON.parse(s) as Line);
    } catch {
      // a cut-off line: skip it
    }
  }
  return out;
}

const num = (v: unknown): number | undefined =>
  typeof v === "number" && Number.isFinite(v) ? v : undefined;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The endpoints per Service most lines have: the vs-Services plots keep that shape only. */
export function mainEps(lines: Line[]): number {
  const count = new Map<number, number>();
  for (const l of lines) {
    const e = num(l.eps);
    if (e !== undefined) count.set(e, (count.get(e) ?? 0) + 1);
  }
  let best = 10, n = 0;
  for (const [e, c] of count) if (c > n || (c === n && e === 10)) [best, n] = [e, c];
  return best;
}

/** Median and range per size of `field` in lines of `bench` (default chunking only). */
export function points(lines: Line[], bench: string, field: string, series: string): Point[] {
  const eps = mainEps(lines);
  // A run with another chunking (the "one-tx" jobs) is another configuration: all its lines go.
  const other = new Set(
    lines.filter((l) => l.chunk !== undefined && l.chunk !== "default" && l.label !== undefined)
      .map((l) => l.label),
  );
  const bySize = new Map<number, number[]>();
  for (const l of lines) {
    if (l.bench !== bench || num(l.eps) !== eps || other.has(l.label)) continue;
    const s = num(l.services), v = num(l[field]);
    if (s === undefined || v === undefined) continue;
    bySize.set(s, [...(bySize.get(s) ?? []), v]);
  }
  return [...bySize].sort((a, b) => a[0] - b[0]).map(([services, vs]) => ({
    services,
    series,
    value: median(vs),
    lo: Math.min(...vs),
    hi: Math.max(...vs),
    runs: vs.length,
  }));
}

/** Upstream-layout runs killed at the driver's cap: `{services, cap seconds}` (a lower bound). */
export function upstreamTimeouts(lines: Line[]): { services: number; seconds: number }[] {
  const eps = mainEps(lines);
  const out: { services: number; seconds: number }[] = [];
  for (const l of lines) {
    if (l.bench !== "error") continue;
    const m = String(l.label ?? "").match(/^upstream (\d+)x(\d+)$/);
    const cap = String(l.error ?? "").match(/timeout: > (\d+(?:\.\d+)?) s/);
    if (!m || !cap || Number(m[2]) !== eps) continue;
    out.push({ services: Number(m[1]), seconds: Number(cap[1]) });
  }
  return out;
}

/** The x axis: Services, with a tick at each size measured. */
function servicesAxis(eps: number, log: boolean, data: { services: number }[]): Spec {
  const sizes = [...new Set(data.map((d) => d.services))].sort((a, b) => a - b);
  return {
    field: "services",
    type: "quantitative",
    title: `Services (${eps} endpoints each${log ? ", log scale" : ""})`,
    scale: log ? { type: "log", nice: false, padding: 16 } : { zero: true },
    axis: {
      values: log ? sizes : undefined,
      labelExpr: "datum.value >= 1000 ? datum.value / 1000 + 'k' : datum.value",
    },
  };
}

const SHAPES: Record<string, string> = {
  p50: "circle",
  p99: "square",
  max: "triangle-up",
  "one change": "diamond",
};

/** Median line with points, and a min-max rule where several runs were recorded. */
function medianLayers(y: Spec, color: Spec, shape?: Spec): Spec[] {
  return [
    {
      mark: { type: "line", point: { size: 60, filled: true } },
      encoding: { y, color, ...(shape ? { shape, detail: { field: shape.field } } : {}) },
    },
    {
      transform: [{ filter: "datum.runs > 1" }],
      mark: { type: "rule", strokeWidth: 2 },
      encoding: { y: { ...y, field: "lo" }, y2: { field: "hi" }, color },
    },
  ];
}

/** (1) Cold start to traffic vs Services: ours end to end, ours sync engine, upstream's layout. */
export function coldStartSpec(lines: Line[]): Spec | undefined {
  const data = [
    ...points(lines, "agent-cold", "seconds", "ours: agent, start → traffic"),
    ...points(lines, "sync-cold", "seconds", "ours: sync engine, one full sync"),
    ...points(lines, "upstream-cold", "seconds", "upstream 1.34 layout: one transaction"),
  ];
  const killed = upstreamTimeouts(lines).map((k) => ({
    ...k,
    text: `> ${k.seconds} s: killed at the cap`,
  }));
  if (data.length === 0) return undefined;
  const eps = mainEps(lines);
  const y = {
    field: "value",
    type: "quantitative",
    title: "seconds (log scale)",
    scale: LOG_Y,
  };
  const color = { field: "series", type: "nominal", title: null };
  const layers: Spec[] = medianLayers(y, color);
  if (killed.length > 0) {
    layers.push({
      data: { values: killed },
      layer: [
        {
          mark: { type: "point", shape: "triangle-up", size: 120, filled: true, color: "#d62728" },
          encoding: { y: { ...y, field: "seconds" } },
        },
        {
          mark: { type: "text", align: "right", dx: -8, fontSize: 12, color: "#d62728" },
          encoding: { y: { ...y, field: "seconds" }, text: { field: "text" } },
        },
      ],
    });
  }
  return frame(
    "Cold start vs cluster size",
    "time until Services answer; lower is better",
    data,
    { x: servicesAxis(eps, true, [...data, ...killed]) },
    layers,
  );
}

/** (2) One endpoint change vs Services: ours (write → traffic, and the engine alone), upstream's. */
export function changeLatencySpec(lines: Line[]): Spec | undefined {
  const ours = "ours: agent, API write → traffic";
  const data = [
    ...points(lines, "agent-endpoint-change", "p50ms", ours).map((p) => ({ ...p, stat: "p50" })),
    ...points(lines, "agent-endpoint-change", "p99ms", ours).map((p) => ({ ...p, stat: "p99" })),
    ...points(lines, "agent-endpoint-change", "maxms", ours).map((p) => ({ ...p, stat: "max" })),
    ...points(lines, "sync-endpoint-change", "seconds", "ours: sync engine, change → commit")
      .map((p) => ({
        ...p,
        value: p.value * 1000,
        lo: p.lo * 1000,
        hi: p.hi * 1000,
        stat: "one change",
      })),
    ...["p50", "p99", "max"].flatMap((stat) =>
      points(
        lines,
        "upstream-endpoint-change",
        `${stat}ms`,
        "upstream 1.34 layout: change → commit",
      )
        .map((p) => ({ ...p, stat }))
    ),
  ];
  if (data.length === 0) return undefined;
  const y = {
    field: "value",
    type: "quantitative",
    title: "milliseconds (log scale)",
    scale: LOG_Y,
  };
  const color = { field: "series", type: "nominal", title: null };
  const stats = Object.keys(SHAPES).filter((s) => data.some((d) => d.stat === s));
  const shape = {
    field: "stat",
    type: "nominal",
    title: "statistic",
    scale: { domain: stats, range: stats.map((s) => SHAPES[s]) },
  };
  return frame(
    "One endpoint change vs cluster size",
    "each change alone; lower is better",
    data,
    { x: servicesAxis(mainEps(lines), true, data) },
    medianLayers(y, color, shape),
  );
}

/** (3) RSS of the agent's process tree vs Services: peak during the cold start, and at rest. */
export function memorySpec(lines: Line[]): Spec | undefined {
  const data = [
    ...points(lines, "agent-cold", "peakMB", "peak (cold start)"),
    ...points(lines, "agent-steady", "rssMB", "at rest (after the cold start)"),
  ];
  if (data.length === 0) return undefined;
  const y = { field: "value", type: "quantitative", title: "RSS, MB", scale: { zero: true } };
  const color = { field: "series", type: "nominal", title: null };
  return frame(
    "Agent memory vs cluster size",
    "RSS of the agent's process tree, from /proc",
    data,
    { x: servicesAxis(mainEps(lines), false, data) },
    medianLayers(y, color),
  );
}

/** The churn runs' time series: tracked-change latency and RSS, runs ordered by cluster size. */
export function churnSeries(lines: Line[]): {
  latency: { t: number; ms: number; run: string }[];
  rss: { t: number; mb: number; run: string }[];
  runs: string[];
  rates: number[];
  periods: string[];
} {
  const latency: { t: number; ms: number; run: string }[] = [];
  const rss: { t: number; mb: number; run: string }[] = [];
  const runs: string[] = [];
  const rates: number[] = [];
  const periods = new Set<string>();
  const seen = new Map<string, number>();
  const churns = lines.filter((l) => l.bench === "agent-churn" && l.series)
    .sort((a, b) => (num(a.services) ?? 0) - (num(b.services) ?? 0));
  for (const l of churns) {
    const series = l.series as { latencyMs?: [number, number][]; rssMB?: [number, number][] };
    const size = `${num(l.services)! / 1000}k × ${num(l.eps)}`;
    const k = (seen.get(size) ?? 0) + 1;
    seen.set(size, k);
    const run = k === 1 ? size : `${size} (run ${k})`;
    runs.push(run);
    for (const [t, ms] of series.latencyMs ?? []) latency.push({ t, ms, run });
    for (const [t, mb] of series.rssMB ?? []) rss.push({ t, mb, run });
    const r = num(l.writesPerSecond);
    if (r !== undefined) rates.push(r);
    if (typeof l.minSyncPeriod === "string") periods.add(l.minSyncPeriod);
  }
  return { latency, rss, runs, rates, periods: [...periods] };
}

/** The median latency of each run in windows of `step` seconds, at the mean time of each window. */
export function windowMedians(
  latency: { t: number; ms: number; run: string }[],
  step: number,
): { t: number; ms: number; run: string }[] {
  const groups = new Map<string, { run: string; t: number[]; ms: number[] }>();
  for (const p of latency) {
    const key = `${p.run}\u0000${Math.floor(p.t / step)}`;
    const g = groups.get(key) ?? { run: p.run, t: [], ms: [] };
    g.t.push(p.t);
    g.ms.push(p.ms);
    groups.set(key, g);
  }
  const mean = (xs: number[]) => Math.round((xs.reduce((a, b) => a + b, 0) / xs.length) * 10) / 10;
  return [...groups.values()].map((g) => ({ t: mean(g.t), ms: median(g.ms), run: g.run }))
    .sort((a, b) => a.run.localeCompare(b.run) || a.t - b.t);
}

const WINDOW_SECONDS = 5;

/** (4) Churn over time: each tracked change's latency, and RSS, against seconds into the churn. */
export function churnSpec(lines: Line[]): Spec | undefined {
  const { latency, rss, runs, rates, periods } = churnSeries(lines);
  if (latency.length === 0) return undefined;
  const rate = rates.length ? ` at ~${Math.round(median(rates))} writes/s` : "";
  const period = periods.length === 1 ? `, --min-sync-period ${periods[0]}` : "";
  const x = { field: "t", type: "quantitative", title: "seconds since the churn began" };
  const color = { field: "run", type: "nominal", title: "cluster", scale: { domain: runs } };
  const y = { field: "ms", type: "quantitative", title: "tracked change, write → traffic, ms" };
  const panels: Spec[] = [{
    width: WIDTH,
    height: HEIGHT,
    layer: [
      {
        data: { values: latency },
        mark: { type: "point", size: 24, filled: true, opacity: 0.6 },
        encoding: { x, y, color },
      },
      {
        data: { values: windowMedians(latency, WINDOW_SECONDS) },
        mark: { type: "line", strokeWidth: 2.5 },
        encoding: { x, y, color },
      },
    ],
  }];
  if (rss.length > 0) {
    panels.push({
      width: WIDTH,
      height: 120,
      data: { values: rss },
      mark: { type: "line", strokeWidth: 1.5 },
      encoding: {
        x,
        y: {
          field: "mb",
          type: "quantitative",
          title: "RSS, MB",
          scale: { zero: false, padding: 8 },
        },
        color,
      },
    });
  }
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: {
      text: "Latency under churn, over time",
      subtitle: [
        `rolling updates and Service changes${rate}${period}`,
        `dots: a tracked endpoint change every 0.5 s; lines: their median per ${WINDOW_SECONDS} s`,
      ],
    },
    background: "white",
    padding: 12,
    config: CONFIG,
    vconcat: panels,
  };
}

function frame(title: string, subtitle: string, data: unknown[], enc: Spec, layer: Spec[]): Spec {
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: { text: title, subtitle },
    width: WIDTH,
    height: HEIGHT,
    background: "white",
    padding: 12,
    config: CONFIG,
    data: { values: data },
    encoding: enc,
    layer,
  };
}

/** Every plot the lines have data for, named for their SVG file. */
export function plots(lines: Line[]): Plot[] {
  const out: Plot[] = [];
  const add = (name: string, spec: Spec | undefined) => spec && out.push({ name, spec });
  add("bench-cold-start", coldStartSpec(lines));
  add("bench-change-latency", changeLatencySpec(lines));
  add("bench-memory", memorySpec(lines));
  add("bench-churn", churnSpec(lines));
  return out;
}
