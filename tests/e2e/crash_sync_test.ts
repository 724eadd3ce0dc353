/**
 * Crashes mid-sync, outer half: makes a node namespace and runs tests/e2e/crash_sync_inner.ts in
 * it (KNP_IN_TEST_NETNS=1), which builds the client and backend namespaces of the scale harness
 * around it and SIGKILLs the agent during its cold start, a restart's regeneration and a large
 * partial sync. The inner output is shown live.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, Netns, repoRoot, run } from "../netns.ts";

/** Deletes the namespaces a killed inner run (process `pid`) left, ending what runs in them. */
async function cleanUpAfter(pid: number): Promise<void> {
  const list = await run(["ip", "netns", "list"], { check: false });
  for (const name of list.stdout.split("\n").map((l) => l.split(" ")[0])) {
    if (!name.startsWith(`knp${pid}-`)) continue;
    const pids = await run(["ip", "netns", "pids", name], { check: false });
    for (const p of pids.stdout.split(/\s+/).filter((x) => x !== "")) {
      try {
        Deno.kill(Number(p), "SIGKILL");
      } catch { /* gone */ }
    }
    await run(["ip", "netns", "delete", name], { check: false });
  }
}

e2eTest("crash mid-sync: the agent killed at any point converges after a restart", async () => {
  const ns = await Netns.create("crash");
  try {
    const inner = ns.spawn([
      "env",
      "KNP_IN_TEST_NETNS=1",
      denoBin,
      "test",
      "-A",
      "--no-check",
      `${repoRoot}/tests/e2e/crash_sync_inner.ts`,
    ], { stdout: "inherit", stderr: "inherit" });
    // A hung inner run must not hang CI.
    const timer = setTimeout(() => inner.kill("SIGKILL"), 5 * 60_000);
    const st = await inner.status;
    clearTimeout(timer);
    await cleanUpAfter(inner.pid);
    assert.equal(st.code, 0, "the inner driver failed; see its output above");
  } finally {
    await ns.delete();
  }
});
