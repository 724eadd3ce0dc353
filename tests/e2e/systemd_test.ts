/**
 * The systemd unit (deploy/systemd/kube-nft-proxy.service) started by a real systemd: a Debian
 * root booted with systemd-nspawn inside a {@link Topology}'s node namespace, the agent installed
 * in it as docs/deploy.md tells a bare-metal user, and the container's systemd driven from
 * outside. tests/e2e/systemd_inner.ts holds the checks; this half makes the root, the topology,
 * and checks that the host's own ruleset is untouched.
 *
 * Opt-in, because its first run downloads a Debian root (about 100 MB, 1.5 min; cached under
 * /var/tmp/kube-nft-proxy-e2e afterwards): `KNP_SYSTEMD_E2E=1 ./denow task test:e2e` or
 * `KNP_SYSTEMD_E2E=1 ./denow test -A tests/e2e/systemd_test.ts`. Needs root, debootstrap and
 * systemd-container (systemd-nspawn), gcc and libc6-dev (scripts/stage-binary.sh's launcher),
 * nftables. Rebuilds the bundle (`deno task bundle`) when it is older than the source.
 * With KNP_SYSTEMD_E2E=1 and KNP_REQUIRE_E2E=1 a missing prerequisite fails the test.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, realKernelUnavailable, repoRoot, run } from "../netns.ts";
import { cachedRoot, copyRoot, removeRootCopy } from "./fixtures/debian_root.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";
import { removeNspawnLeftovers } from "./fixtures/nspawn.ts";

const NAME = "systemd: the unit under a real systemd (nspawn), real traffic, sandbox checked";

/** Commands the test runs, with the Debian package providing each. */
const TOOLS: Record<string, string> = {
  "debootstrap": "debootstrap",
  "systemd-nspawn": "systemd-container",
  "nsenter": "util-linux",
  "gcc": "gcc",
  "nft": "nftables",
};

function onPath(cmd: string): boolean {
  const dirs = (Deno.env.get("PATH") ?? "").split(":").concat(["/usr/sbin", "/sbin"]);
  return dirs.some((d) => {
    try {
      return Deno.statSync(`${d}/${cmd}`).isFile;
    } catch {
      return false;
    }
  });
}

/** Why this test cannot run here, or undefined. */
function unavailable(): string | undefined {
  const missing = Object.entries(TOOLS).filter(([cmd]) => !onPath(cmd));
  if (missing.length) {
    return `missing ${missing.map(([c]) => c).join(", ")} ` +
      `(apt-get install ${[...new Set(missing.map(([, p]) => p))].join(" ")})`;
  }
  return undefined;
}

/** Newest modification time of the files the bundle is built from. */
function newestSource(dir = repoRoot): number {
  let newest = 0;
  for (const e of Deno.readDirSync(dir)) {
    if ([".git", ".tools", "node_modules", "dist", "tests", "docs", "demo"].includes(e.name)) {
      continue;
    }
    const p = `${dir}/${e.name}`;
    if (e.isDirectory) newest = Math.max(newest, newestSource(p));
    else if (/\.ts$|^deno\.(json|lock)$/.test(e.name)) {
      newest = Math.max(newest, Deno.statSync(p).mtime?.getTime() ?? 0);
    }
  }
  return newest;
}

/** The bundle `deno task start:bundle` runs (the last word of that task in deno.json). */
function bundlePath(): string {
  const task = JSON.parse(Deno.readTextFileSync(`${repoRoot}/deno.json`)).tasks?.["start:bundle"];
  const entry = typeof task === "string" ? task.trim().split(/\s+/).at(-1) : undefined;
  if (!entry?.endsWith(".js")) throw new Error(`deno.json: start:bundle runs no bundle: ${task}`);
  return `${repoRoot}/${entry}`;
}

/** Runs `deno task bundle` unless the bundle is newer than every source file. */
async function freshBundle(): Promise<void> {
  const bundle = bundlePath();
  let built = 0;
  try {
    built = Deno.statSync(bundle).mtime?.getTime() ?? 0;
  } catch { /* not built */ }
  if (built > newestSource()) return;
  console.error(`${bundle} is missing or older than the source: deno task bundle`);
  const p = new Deno.Command(denoBin, { args: ["task", "bundle"], cwd: repoRoot }).spawn();
  assert.equal((await p.status).code, 0, "deno task bundle failed");
}

/** Stops any systemd-nspawn still running on `dir` (the inner driver died before poweroff). */
async function stopLeftoverNspawn(dir: string): Promise<void> {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    let argv: string[];
    try {
      argv = Deno.readTextFileSync(`/proc/${e.name}/cmdline`).split("\0");
    } catch {
      continue;
    }
    if (!argv[0]?.endsWith("systemd-nspawn") || argv[argv.indexOf("-D") + 1] !== dir) continue;
    const pid = Number(e.name);
    console.error(`systemd-nspawn ${pid} still runs on ${dir}: SIGTERM (container poweroff)`);
    Deno.kill(pid, "SIGTERM");
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 200));
      try {
        Deno.statSync(`/proc/${pid}`);
      } catch {
        break;
      }
      if (i === 99) Deno.kill(pid, "SIGKILL");
    }
  }
}

async function systemdTest(): Promise<void> {
  const t0 = Date.now();
  const hostTables = (await run(["nft", "list", "tables"])).stdout;
  await freshBundle();
  const { path: cached, built } = await cachedRoot();
  const dir = await copyRoot(cached);
  console.error(`root: ${built ? "built" : "cached"} ${cached}, this run's copy ${dir}`);
  Deno.env.set("KNP_SYSTEMD_RUN_ROOT", dir);
  // `ip netns exec` gives the inner driver a /sys without cgroups; nspawn starts from ours.
  Deno.env.set("KNP_SYSTEMD_HOST_MNT", `/proc/${Deno.pid}/ns/mnt`);
  const pass = ["KNP_SYSTEMD_RUN_ROOT", "KNP_SYSTEMD_HOST_MNT"];
  try {
    await runInnerDriver("sd", "systemd_inner.ts", pass);
  } finally {
    for (const name of pass) Deno.env.delete(name);
    await stopLeftoverNspawn(dir);
    removeNspawnLeftovers(dir);
    await removeRootCopy(dir);
    console.error(`systemd e2e: ${((Date.now() - t0) / 1000).toFixed(0)} s in all`);
  }
  assert.equal((await run(["nft", "list", "tables"])).stdout, hostTables, "host's tables changed");
}

if (Deno.env.get("KNP_SYSTEMD_E2E") !== "1") {
  Deno.test({ name: `${NAME} (set KNP_SYSTEMD_E2E=1 to run)`, ignore: true, fn: () => {} });
} else {
  const why = realKernelUnavailable() ? undefined : unavailable();
  if (why !== undefined && Deno.env.get("KNP_REQUIRE_E2E") === "1") {
    e2eTest(NAME, () => {
      throw new Error(`cannot run: ${why}`);
    });
  } else if (why !== undefined) {
    console.error(`SKIP ${NAME}: ${why}`);
    Deno.test({ name: NAME, ignore: true, fn: () => {} });
  } else {
    e2eTest(NAME, systemdTest);
  }
}
