/**
 * The source tree is built in floors, and imports run downward only:
 *
 *     main.ts -> agent/ -> conntrack/ -> proxier/ -> ffi/ -> net/
 *
 * A file may import its own floor or any floor below it, never one above, never tests/ or
 * demo/, and the files' import graph has no cycle. The graph is `deno info --json` over every
 * source file (tests and testdata left out), as agent/client_node_graph_test.ts reads it:
 * static, dynamic and type-only imports all count. `deno info` reads the files and loads
 * nothing, so this runs without the native libraries.
 */
import assert from "node:assert/strict";

/** Floors, bottom first: a folder (or main.ts) and its height. */
const FLOORS: readonly string[] = ["net", "ffi", "proxier", "conntrack", "agent", "main.ts"];

const root = new URL("../", import.meta.url);

interface Dep {
  specifier: string;
  code?: { specifier: string };
  type?: { specifier: string };
}
interface Info {
  modules: { specifier: string; dependencies?: Dep[] }[];
  redirects: Record<string, string>;
}

/** A file's floor (its index in FLOORS), or -1 when it is in none (tests/, demo/, ...). */
function floorOf(path: string): number {
  return FLOORS.indexOf(path.split("/")[0]);
}

/** Source files (repo-relative) of the floors: no tests, no testdata. */
async function sourceFiles(): Promise<string[]> {
  const out: string[] = ["main.ts"];
  const walk = async (dir: string): Promise<void> => {
    for await (const e of Deno.readDir(new URL(dir, root))) {
      const p = `${dir}/${e.name}`;
      if (e.isDirectory && e.name !== "testdata") await walk(p);
      else if (e.isFile && p.endsWith(".ts") && !p.endsWith("_test.ts")) out.push(p);
    }
  };
  for (const f of FLOORS) if (f !== "main.ts") await walk(f);
  return out.sort();
}

/** `deno info --json` of one entry module that imports every file in `files`. */
async function info(files: string[]): Promise<Info> {
  const dir = await Deno.makeTempDir({ prefix: "knp-layers-" });
  try {
    const entry = `${dir}/all.ts`;
    await Deno.writeTextFile(entry, files.map((f) => `import "${new URL(f, root)}";\n`).join(""));
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", "--config", new URL("deno.json", root).pathname, entry],
      cwd: root,
      env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    return JSON.parse(new TextDecoder().decode(out.stdout));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The import edges between our files (repo-relative paths), from a `deno info` graph. */
function edges(g: Info, sources: ReadonlySet<string>): Map<string, Set<string>> {
  const prefix = root.href;
  const rel = (s: string) => {
    const r = g.redirects[s] ?? s;
    return r.startsWith(prefix) ? r.slice(prefix.length) : undefined;
  };
  const out = new Map<string, Set<string>>();
  for (const m of g.modules) {
    const from = rel(m.specifier);
    if (from === undefined || !sources.has(from)) continue;
    const to = new Set<string>();
    for (const d of m.dependencies ?? []) {
      for (const t of [d.code?.specifier, d.type?.specifier]) {
        const r = t === undefined ? undefined : rel(t);
        if (r !== undefined) to.add(r);
      }
    }
    out.set(from, to);
  }
  return out;
}

/** Imports that climb a floor or leave the floors, as "from -> to". */
function upward(graph: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const bad: string[] = [];
  for (const [from, tos] of graph) {
    for (const to of tos) {
      const f = floorOf(to);
      if (f < 0 || f > floorOf(from)) bad.push(`${from} -> ${to}`);
    }
  }
  return bad.sort();
}

/** One import cycle, as its files in order (the first repeated last), or undefined. */
function findCycle(graph: ReadonlyMap<string, ReadonlySet<string>>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (v: string): string[] | undefined => {
    state.set(v, "open");
    path.push(v);
    for (const w of graph.get(v) ?? []) {
      if (state.get(w) === "open") return [...path.slice(path.indexOf(w)), w];
      if (state.get(w) === undefined) {
        const c = visit(w);
        if (c) return c;
      }
    }
    path.pop();
    state.set(v, "done");
    return undefined;
  };
  for (const v of [...graph.keys()].sort()) {
    if (state.get(v) === undefined) {
      const c = visit(v);
      if (c) return c;
    }
  }
  return undefined;
}

Deno.test("imports run down the floors (net, ffi, proxier, conntrack, agent, main.ts), without cycles", async () => {
  const files = await sourceFiles();
  const graph = edges(await info(files), new Set(files));
  assert.deepEqual(files.filter((f) => !graph.has(f)), [], "deno info saw every source file");
  assert.ok(graph.get("ffi/nftables/client.ts")?.has("net/ip.ts"), "the walk sees imports");
  assert.deepEqual(upward(graph), []);
  assert.equal(findCycle(graph)?.join(" -> "), undefined);
  assert.deepEqual(kubeLeaks(graph), []);
});

/**
 * agent/kube/ is the API client: it may use agent/log.ts (types) and the floors below, nothing
 * else of agent/ — no engine, no HTTP servers, no flags — so it can be read and tested alone.
 */
function kubeLeaks(graph: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  const bad: string[] = [];
  for (const [from, tos] of graph) {
    if (!from.startsWith("agent/kube/")) continue;
    for (const to of tos) {
      if (to.startsWith("agent/") && !to.startsWith("agent/kube/") && to !== "agent/log.ts") {
        bad.push(`${from} -> ${to}`);
      }
    }
  }
  return bad.sort();
}

Deno.test("the floor check and the cycle finder catch what they look for", () => {
  const g = new Map<string, Set<string>>([
    ["net/ip.ts", new Set(["net/family.ts"])],
    ["net/family.ts", new Set()],
    ["ffi/a.ts", new Set(["net/ip.ts", "proxier/b.ts", "tests/x.ts"])],
    ["proxier/b.ts", new Set(["ffi/a.ts"])],
  ]);
  assert.deepEqual(upward(g), ["ffi/a.ts -> proxier/b.ts", "ffi/a.ts -> tests/x.ts"]);
  assert.deepEqual(findCycle(g), ["ffi/a.ts", "proxier/b.ts", "ffi/a.ts"]);
  g.set("agent/kube/w.ts", new Set(["agent/log.ts", "agent/engine.ts", "agent/kube/v.ts"]));
  assert.deepEqual(kubeLeaks(g), ["agent/kube/w.ts -> agent/engine.ts"]);
  g.get("proxier/b.ts")!.clear();
  assert.equal(findCycle(g), undefined);
});
