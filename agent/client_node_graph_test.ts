/**
 * The agent must not load @kubernetes/client-node unless a kubeconfig needs it: importing it
 * costs ~75 MB of memory. `deno info --json` lists dynamic imports too (marked `isDynamic`) and
 * type-only imports under `type`, so the static graph is walked here from main.ts.
 */
import assert from "node:assert/strict";

interface Dep {
  specifier: string;
  code?: { specifier: string };
  isDynamic?: boolean;
}
interface Info {
  roots: string[];
  modules: { specifier: string; dependencies?: Dep[] }[];
  redirects: Record<string, string>;
}

const root = new URL("../", import.meta.url);

async function info(entry: string): Promise<Info> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", entry],
    cwd: root,
    env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** Modules reachable from the roots through static imports, and the dynamic import targets. */
function walk(g: Info): { staticMods: Set<string>; dynamicTargets: Set<string> } {
  const byId = new Map(g.modules.map((m) => [m.specifier, m]));
  const resolve = (s: string) => g.redirects[s] ?? s;
  const staticMods = new Set<string>();
  const dynamicTargets = new Set<string>();
  const todo = g.roots.map(resolve);
  while (todo.length > 0) {
    const s = todo.pop()!;
    if (staticMods.has(s)) continue;
    staticMods.add(s);
    for (const d of byId.get(s)?.dependencies ?? []) {
      if (!d.code) continue; // type-only: erased
      if (d.isDynamic) dynamicTargets.add(resolve(d.code.specifier));
      else todo.push(resolve(d.code.specifier));
    }
  }
  return { staticMods, dynamicTargets };
}

const isClientNode = (s: string) => /^npm:\/?@kubernetes\/client-node@/.test(s);

Deno.test("main.ts does not statically import @kubernetes/client-node", async () => {
  const { staticMods, dynamicTargets } = walk(await info("main.ts"));
  assert.ok(staticMods.size > 50, `the walk found the agent's modules (${staticMods.size})`);
  assert.ok([...staticMods].some((s) => s.endsWith("/agent/kube/kube_credentials.ts")));
  assert.deepEqual([...staticMods].filter(isClientNode), []);
  // client-node stays reachable, but only through the dynamically imported fallback.
  const fallback = [...dynamicTargets].find((s) =>
    s.endsWith("/agent/kube/client_node_fallback.ts")
  );
  assert.ok(fallback, "the fallback module is a dynamic import");
  assert.ok(!staticMods.has(fallback));
});

Deno.test("the graph walk sees a static client-node import where there is one", async () => {
  const { staticMods } = walk(await info("agent/kube/client_node_fallback.ts"));
  assert.ok([...staticMods].some(isClientNode));
});
