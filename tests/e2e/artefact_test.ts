/**
 * The artefact users install, on the real kernel: `deno task bundle` builds dist/bundle/ (main.js
 * and its chunks: what `deno task compile` turns into the binary and what the image carries), then
 * the whole-agent e2e (agent_inner.ts) and the lazily loaded paths (artefact_inner.ts: client-node
 * credentials, the conntrack Worker, trace/explain) run against it, the latter also from source.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot, run } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

/** Builds the bundle from the working tree, so the test never runs a stale artefact. */
async function bundle(): Promise<void> {
  const r = await run([denoBin, "task", "--cwd", repoRoot, "bundle"], { check: false });
  assert.equal(r.code, 0, `deno task bundle failed:\n${r.stdout}\n${r.stderr}`);
}

e2eTest("artefact: the whole-agent e2e against the bundle", async () => {
  await bundle();
  await runInnerDriver("agb", "agent_inner.ts", ["KNP_AGENT_LOG"], {
    KNP_AGENT_ARTEFACT: "bundle",
  });
});

e2eTest("artefact: lazily loaded paths from the bundle", async () => {
  await bundle();
  await runInnerDriver("afb", "artefact_inner.ts", [], { KNP_AGENT_ARTEFACT: "bundle" });
});

e2eTest("artefact: lazily loaded paths from source", async () => {
  await runInnerDriver("afs", "artefact_inner.ts", [], { KNP_AGENT_ARTEFACT: "source" });
});
