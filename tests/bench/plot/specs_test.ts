import assert from "node:assert/strict";
import { compile, type TopLevelSpec } from "vega-lite";
import {
  changeLatencySpec,
  churnSeries,
  churnSpec,
  coldStartSpec,
  type Line,
  mainEps,
  memorySpec,
  parseLines,
  plots,
  points,
  type Spec,
  upstreamTimeouts,
  windowMedians,
} from "./specs.ts";
import { shortenCoordinates } from "../plot.ts";

const run: Line[] = [
  {
    label: "agent 1000x10",
    bench: "agent-cold",
    services: 1000,
    eps: 10,
    seconds: 1.6,
    peakMB: 101,
  },
  {
    label: "agent 30000x10",
    bench: "agent-cold",
    services: 30000,
    eps: 10,
    seconds: 5.9,
    peakMB: 424,
  },
  {
    label: "agent 30000x10",
    bench: "agent-cold",
    services: 30000,
    eps: 10,
    seconds: 6.5,
    peakMB: 443,
  },
  { label: "agent 30000x10", bench: "agent-cold", services: 30000, eps: 10, seconds: 7.1 },
  { label: "agent 5000x50", bench: "agent-cold", services: 5000, eps: 50, seconds: 3.2 },
  { label: "agent 1000x10", bench: "agent-steady", services: 1000, eps: 10, rssMB: 86 },
  {
    label: "agent 1000x10",
    bench: "agent-endpoint-change",
    services: 1000,
    eps: 10,
    p50ms: 7.2,
    maxms: 16,
  },
  {
    label: "ours 1000x10",
    bench: "sync-cold",
    services: 1000,
    eps: 10,
    chunk: "default",
    seconds: 0.09,
  },
  {
    label: "ours 1000x10 one-tx",
    bench: "sync-cold",
    services: 1000,
    eps: 10,
    chunk: 0,
    seconds: 9,
  },
  {
    label: "ours 1000x10",
    bench: "sync-endpoint-change",
    services: 1000,
    eps: 10,
    seconds: 0.0014,
  },
  { label: "upstream 1000x10", bench: "upstream-cold", services: 1000, eps: 10, seconds: 0.83 },
  {
    label: "upstream 1000x10",
    bench: "upstream-endpoint-change",
    services: 1000,
    eps: 10,
    p50ms: 90,
    p99ms: 120,
    maxms: 120,
  },
  { label: "upstream 10000x10", bench: "error", error: "timeout: > 120 s" },
  {
    label: "agent 1000x10",
    bench: "agent-churn",
    services: 1000,
    eps: 10,
    writesPerSecond: 98.1,
    minSyncPeriod: "1s (default)",
    series: { latencyMs: [[0.5, 900], [1, 1100]], rssMB: [[1, 100], [2, 104]] },
  },
];

/** The data rows of a layered spec. */
const values = (s: Spec | undefined) => (s?.data as { values: Record<string, unknown>[] }).values;

Deno.test("parseLines reads JSON lines, skipping noise and a cut-off line, or a JSON array", () => {
  const text = 'bench: starting\n{"bench":"a","x":1}\n\n{"bench":"b"\n{"bench":"c"}\n';
  assert.deepStrictEqual(parseLines(text).map((l) => l.bench), ["a", "c"]);
  assert.deepStrictEqual(parseLines('[{"bench":"a"}]').map((l) => l.bench), ["a"]);
});

Deno.test("points: median and range per size, the main shape only, default chunking only", () => {
  assert.deepStrictEqual(mainEps(run), 10);
  assert.deepStrictEqual(points(run, "agent-cold", "seconds", "s"), [
    { services: 1000, series: "s", value: 1.6, lo: 1.6, hi: 1.6, runs: 1 },
    { services: 30000, series: "s", value: 6.5, lo: 5.9, hi: 7.1, runs: 3 },
  ]);
  // a line without the field is not a run of it
  assert.deepStrictEqual(points(run, "agent-cold", "peakMB", "p")[1], {
    services: 30000,
    series: "p",
    value: 433.5,
    lo: 424,
    hi: 443,
    runs: 2,
  });
  assert.deepStrictEqual(points(run, "sync-cold", "seconds", "s").map((p) => p.value), [0.09]);
});

Deno.test("upstreamTimeouts: a killed upstream run is a lower bound at the cap", () => {
  assert.deepStrictEqual(upstreamTimeouts(run), [{ services: 10000, seconds: 120 }]);
});

Deno.test("coldStartSpec: three series on log axes, the killed run marked", () => {
  const spec = coldStartSpec(run)!;
  const rows = values(spec);
  assert.deepStrictEqual(
    rows.map((r) => [r.series, r.services, r.value]),
    [
      ["ours: agent, start → traffic", 1000, 1.6],
      ["ours: agent, start → traffic", 30000, 6.5],
      ["ours: sync engine, one full sync", 1000, 0.09],
      ["upstream 1.34 layout: one transaction", 1000, 0.83],
    ],
  );
  const x = (spec.encoding as { x: Spec }).x;
  assert.deepStrictEqual((x.scale as Spec).type, "log");
  assert.deepStrictEqual((x.axis as Spec).values, [1000, 10000, 30000]);
  const layers = spec.layer as Spec[];
  const killed = layers.find((l) => l.data !== undefined)!;
  assert.deepStrictEqual(values(killed), [
    { services: 10000, seconds: 120, text: "> 120 s: killed at the cap" },
  ]);
  assert.deepStrictEqual(coldStartSpec([]), undefined);
});

Deno.test("changeLatencySpec: milliseconds for every series, shapes for the statistics present", () => {
  const spec = changeLatencySpec(run)!;
  const rows = values(spec);
  assert.deepStrictEqual(
    rows.map((r) => [r.series, r.stat, r.value]),
    [
      ["ours: agent, API write → traffic", "p50", 7.2],
      ["ours: agent, API write → traffic", "max", 16],
      ["ours: sync engine, change → commit", "one change", 1.4],
      ["upstream 1.34 layout: change → commit", "p50", 90],
      ["upstream 1.34 layout: change → commit", "p99", 120],
      ["upstream 1.34 layout: change → commit", "max", 120],
    ],
  );
  const line = (spec.layer as Spec[])[0].encoding as { shape: { scale: Spec } };
  assert.deepStrictEqual(line.shape.scale, {
    domain: ["p50", "p99", "max", "one change"],
    range: ["circle", "square", "triangle-up", "diamond"],
  });
});

Deno.test("memorySpec: peak and at rest in MB on a linear axis from zero", () => {
  const spec = memorySpec(run)!;
  assert.deepStrictEqual(values(spec).map((r) => [r.series, r.services, r.value]), [
    ["peak (cold start)", 1000, 101],
    ["peak (cold start)", 30000, 433.5],
    ["at rest (after the cold start)", 1000, 86],
  ]);
  const x = (spec.encoding as { x: Spec }).x;
  assert.deepStrictEqual((x.scale as Spec).zero, true);
});

Deno.test("churnSpec: latency and RSS panels against seconds, one colour per run", () => {
  const second = { ...run.at(-1)!, series: { latencyMs: [[0.5, 700]], rssMB: [] } };
  const s = churnSeries([...run, second]);
  assert.deepStrictEqual(s.latency, [
    { t: 0.5, ms: 900, run: "1k × 10" },
    { t: 1, ms: 1100, run: "1k × 10" },
    { t: 0.5, ms: 700, run: "1k × 10 (run 2)" },
  ]);
  assert.deepStrictEqual(s.rss.length, 2);
  assert.deepStrictEqual(s.runs, ["1k × 10", "1k × 10 (run 2)"]);
  const spec = churnSpec(run)!;
  assert.deepStrictEqual((spec.vconcat as Spec[]).length, 2);
  const subtitle = String((spec.title as Spec).subtitle);
  assert.ok(subtitle.includes("~98 writes/s, --min-sync-period 1s (default)"), subtitle);
  assert.deepStrictEqual(churnSpec(run.filter((l) => l.bench !== "agent-churn")), undefined);
});

Deno.test("windowMedians: the median of each run's window, at the window's mean time", () => {
  const lat = [
    { t: 0.5, ms: 100, run: "a" },
    { t: 1, ms: 300, run: "a" },
    { t: 4.5, ms: 200, run: "a" },
    { t: 5.5, ms: 900, run: "a" },
    { t: 0.5, ms: 50, run: "b" },
  ];
  assert.deepStrictEqual(windowMedians(lat, 5), [
    { t: 2, ms: 200, run: "a" },
    { t: 5.5, ms: 900, run: "a" },
    { t: 0.5, ms: 50, run: "b" },
  ]);
});

Deno.test("points: a run with another chunking (one-tx) is left out, all its lines", () => {
  const oneTx: Line[] = [
    {
      label: "ours 1000x10 one-tx",
      bench: "sync-cold",
      services: 1000,
      eps: 10,
      chunk: 0,
      seconds: 9,
    },
    {
      label: "ours 1000x10 one-tx",
      bench: "sync-endpoint-change",
      services: 1000,
      eps: 10,
      seconds: 1,
    },
  ];
  assert.deepStrictEqual(
    points([...run, ...oneTx], "sync-endpoint-change", "seconds", "s").map((p) => p.value),
    [0.0014],
  );
});

Deno.test("plots: every spec compiles with Vega-Lite; a plot without data is left out", () => {
  const all = plots(run);
  assert.deepStrictEqual(all.map((p) => p.name), [
    "bench-cold-start",
    "bench-change-latency",
    "bench-memory",
    "bench-churn",
  ]);
  for (const p of all) {
    const vg = compile(p.spec as unknown as TopLevelSpec).spec;
    assert.ok(Array.isArray(vg.marks) && vg.marks.length > 0, p.name);
  }
  assert.deepStrictEqual(plots(run.filter((l) => l.bench !== "agent-churn")).length, 3);
});

Deno.test("shortenCoordinates rounds geometry, never the text", () => {
  const svg = '<path transform="translate(301.53846153846155,53.7)" d="M2.123456,0L1,2"/>' +
    '<text x="10.555555">0.0912345</text>';
  assert.deepStrictEqual(
    shortenCoordinates(svg),
    '<path transform="translate(301.53,53.7)" d="M2.12,0L1,2"/><text x="10.55">0.0912345</text>',
  );
});
