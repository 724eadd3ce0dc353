/**
 * `deno doc --lint` over every source module of the floors (net/, ffi/, proxier/, conntrack/,
 * agent/ and main.ts; tests, testdata and test builders left out), so that every export has
 * JSDoc and an explicit type (issue 19):
 *
 *     deno run --allow-read --allow-run scripts/doc_lint.ts
 *
 * All modules go to one `deno doc` run, so a type exported by one module and used by another is
 * public. What stays private by nature is npm packages' types: `deno doc` cannot see them as
 * public (re-exporting one makes it lint the package's own API), so a reference to one of
 * {@link NPM_TYPES} is not a finding. Everything else `deno doc --lint` reports is printed,
 * and the script exits 1.
 *
 * @module
 */
import { treeFiles } from "./size_check.ts";

/** npm packages' types our public API hands on, with their package. */
export const NPM_TYPES: Readonly<Record<string, string>> = {
  KubeConfig: "@kubernetes/client-node",
};

/** The floors whose modules are linted. */
const FLOORS = ["net", "ffi", "proxier", "conntrack", "agent"];

/** Whether a repo-relative path is a source module (not a test or test support). */
export function isSourceModule(path: string): boolean {
  if (!path.endsWith(".ts") || path.endsWith(".d.ts")) return false;
  if (path === "main.ts") return true;
  if (!FLOORS.includes(path.split("/")[0])) return false;
  if (/_test\.ts$|(^|\/)testdata\/|_testing\.ts$|(^|\/)testing\.ts$/.test(path)) return false;
  return true;
}

/** One finding of `deno doc --lint`. */
export interface Finding {
  /** The rule, e.g. `missing-jsdoc`. */
  code: string;
  /** Its message. */
  message: string;
  /** `path:line:column`, repo-relative. */
  where: string;
}

/** The findings in `deno doc --lint`'s text output (run with NO_COLOR). */
export function parseFindings(text: string, root: string): Finding[] {
  const out: Finding[] = [];
  const re = /error\[([\w-]+)\]: (.*)\n\s*--> (\S+)/g;
  for (const m of text.matchAll(re)) {
    const where = m[3].replace(/^file:\/\//, "").replace(`${root}/`, "");
    out.push({ code: m[1], message: m[2], where });
  }
  return out;
}

/** Whether a finding only says an npm package's type is not public. */
export function isNpmTypeRef(f: Finding): boolean {
  const m = /references private type '([^']+)'/.exec(f.message);
  return f.code === "private-type-ref" && m !== null && m[1] in NPM_TYPES;
}

/** The source modules of the tree, repo-relative, sorted. */
async function sourceModules(root: string): Promise<string[]> {
  return (await treeFiles(root)).filter(isSourceModule);
}

if (import.meta.main) {
  const root = new URL("../", import.meta.url).pathname.replace(/\/$/, "");
  const files = await sourceModules(root);
  const res = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--lint", ...files],
    cwd: root,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(res.stdout) + new TextDecoder().decode(res.stderr);
  const findings = parseFindings(text, root).filter((f) => !isNpmTypeRef(f));
  for (const f of findings) console.log(`${f.where}: ${f.code}: ${f.message}`);
  if (findings.length > 0 || (!res.success && !text.includes("error["))) {
    if (findings.length === 0) console.log(text);
    console.log(`doc lint: ${findings.length} findings in ${files.length} modules`);
    Deno.exit(1);
  }
  console.log(`doc lint: ok (${files.length} modules)`);
}
