/**
 * `deno task plot [FILE...] [--out=DIR] [--plots=a,b]`: draws the benchmark's results as SVG (docs/img/ by
 * default), headless: Vega-Lite compiles each spec (tests/bench/plot/specs.ts) and Vega renders
 * it to SVG text, with no browser and no canvas.
 *
 * FILE: JSON lines as `deno task bench` writes them (`--json=FILE`, and every run into .bench/);
 * several files are read as one set. Without FILE, the newest .bench/*.jsonl. `--plots` keeps
 * only the named plots: cold-start, change-latency, memory, churn.
 *
 * @module
 */
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import { type Line, parseLines, plots, type Spec } from "./plot/specs.ts";
import { repoRoot } from "../netns.ts";

/** Renders one Vega-Lite spec to SVG text. */
export async function renderSvg(spec: Spec): Promise<string> {
  const vg = compile(spec as unknown as TopLevelSpec).spec;
  const view = new vega.View(vega.parse(vg), { renderer: "none" });
  try {
    return shortenCoordinates(await view.toSVG());
  } finally {
    view.finalize();
  }
}

const GEOMETRY = /\b(d|transform|x|y|x1|x2|y1|y2|points)="([^"]*)"/g;

/** Rounds the geometry attributes' numbers to 2 decimals (Vega writes ~15): half the bytes. */
export function shortenCoordinates(svg: string): string {
  return svg.replace(
    GEOMETRY,
    (_, name: string, value: string) => `${name}="${value.replace(/(\d+\.\d{2})\d+/g, "$1")}"`,
  );
}

/** The newest results file the bench wrote into `.bench/`, if any. */
export function latestResults(dir = `${repoRoot}/.bench`): string | undefined {
  let best: { path: string; mtime: number } | undefined;
  try {
    for (const e of Deno.readDirSync(dir)) {
      if (!e.isFile || !e.name.endsWith(".jsonl")) continue;
      const path = `${dir}/${e.name}`;
      const mtime = Deno.statSync(path).mtime?.getTime() ?? 0;
      if (!best || mtime > best.mtime) best = { path, mtime };
    }
  } catch {
    // no .bench/ yet
  }
  return best?.path;
}

if (import.meta.main) {
  const outArg = Deno.args.find((a) => a.startsWith("--out="));
  const out = outArg ? outArg.slice("--out=".length) : `${repoRoot}/docs/img`;
  let files = Deno.args.filter((a) => !a.startsWith("--"));
  if (files.length === 0) {
    const latest = latestResults();
    if (!latest) {
      console.error("plot: no results file given and none in .bench/: run `deno task bench` first");
      Deno.exit(2);
    }
    files = [latest];
  }
  const lines: Line[] = files.flatMap((f) => parseLines(Deno.readTextFileSync(f)));
  const only = Deno.args.find((a) => a.startsWith("--plots="))?.slice("--plots=".length)
    .split(",");
  const made = plots(lines).filter((p) => !only || only.includes(p.name.replace(/^bench-/, "")));
  if (made.length === 0) {
    console.error(
      `plot: nothing to draw in ${files.join(", ")} (no agent, sync or upstream lines)`,
    );
    Deno.exit(1);
  }
  Deno.mkdirSync(out, { recursive: true });
  for (const p of made) {
    const svg = await renderSvg(p.spec);
    Deno.writeTextFileSync(`${out}/${p.name}.svg`, svg);
    console.log(`plot: ${out}/${p.name}.svg (${(svg.length / 1024).toFixed(1)} KB)`);
  }
}
