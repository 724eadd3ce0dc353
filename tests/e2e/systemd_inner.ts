/**
 * systemd e2e, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/systemd_test.ts (env KNP_TOPO; KNP_SYSTEMD_RUN_ROOT = a fresh copy of a bootable
 * Debian root; KNP_SYSTEMD_HOST_MNT = the outer test's mount namespace, where nspawn starts).
 * Pods 0 and 1 run echo servers "a" and "b".
 *
 * Serves a cluster from the fake API server on this namespace's 127.0.0.1, installs the agent
 * into the root as docs/deploy.md says, boots the root with systemd-nspawn inside this namespace
 * (so the container's loopback is this one and its rules are this node's), and drives the
 * container's own systemd: `enable --now`, the sandbox the unit promises checked in
 * /proc/<MainPID>/status, a clean `stop` that leaves rules and traffic alone, a `start` that
 * adopts them, a SIGKILL that Restart=always recovers from, no permission error in the journal,
 * and `poweroff`.
 * Not a *_test.ts file on purpose: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { FakeApiServer } from "../fakeapi/server.ts";
import { NODE4 } from "../topology.ts";
import { eventually, httpGet } from "./fixtures/agent_process.ts";
import {
  attachTopology,
  nftTable,
  node,
  NODE_NAME,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";
import { NspawnMachine, readTail } from "./fixtures/nspawn.ts";
import {
  agentJournal,
  checkAgentJournal,
  checkSandbox,
  checkStopped,
  negativeOomSettable,
  type NoSysResource,
  readSandbox,
} from "./fixtures/systemd_checks.ts";
import { installAgent, KUBECONFIG_PATH, UNIT_SOURCE } from "./fixtures/systemd_install.ts";
import { capNames, parseStatus, type UnitPromise, unitPromise } from "./fixtures/unit_sandbox.ts";

const topo = attachTopology("tests/e2e/systemd_test.ts");
const ROOT = Deno.env.get("KNP_SYSTEMD_RUN_ROOT");
/** The outer test's mount namespace: nspawn needs the host's /sys/fs/cgroup. */
const HOST_MNT = Deno.env.get("KNP_SYSTEMD_HOST_MNT");
const UNIT = "kube-nft-proxy.service";
const A = topo.podIPv4(0), B = topo.podIPv4(1);

/** What the bare-metal user writes into /etc/default/kube-nft-proxy here. */
const AGENT_ARGS = [
  `--kubeconfig=${KUBECONFIG_PATH}`,
  `--hostname-override=${NODE_NAME}`,
  "--cluster-cidr=198.18.1.0/24,2001:db8:1::/64",
  // nf_conntrack_max / hashsize are host-wide: leave them alone from a test namespace.
  "--conntrack-max-per-core=0",
  // Per namespace: proves the sysctl write gets through ProtectSystem= / ReadWritePaths=.
  "--conntrack-tcp-timeout-established=23h",
  "--v=2",
];

/** Waits until the node's table holds the web Service and it answers from exactly `pods`. */
async function serving(pods: string[]): Promise<void> {
  await eventually(
    "table ip kube-proxy with the web Service",
    async () => {
      return (await nftTable("ip"))?.includes("198.19.0.10") ? true : undefined;
    },
    60_000,
    250,
  );
  await reaches(topo, "tcp", "198.19.0.10", 80, pods, 30_000);
}

/** The fake cluster: web (TCP, NodePort), dns (UDP), web6, each on pods "a" and "b". */
function cluster(): FakeApiServer {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 1000 });
  api.apply(node());
  api.apply(serviceCIDR());
  api.apply(service("web", { ip: "198.19.0.10", nodePort: 30080 }));
  api.apply(slice("web", [A, B]));
  api.apply(service("dns", { ip: "198.19.0.53", port: 53, protocol: "UDP" }));
  api.apply(slice("dns", [A, B], "UDP"));
  api.apply(service("web6", { ip: "2001:db8:ffff::10" }));
  api.apply(slice("web6", [topo.podIPv6(0), topo.podIPv6(1)]));
  return api;
}

/**
 * What refuses OOMScoreAdjust= and LimitNOFILE= inside the container where this machine withholds
 * CAP_SYS_RESOURCE: PID 1's bounding set without it, and the write systemd makes, done by root in
 * the container, failing. (systemd's own note is a debug message from the forked child that does
 * not reach the journal.)
 */
async function noSysResource(box: NspawnMachine, host: string): Promise<NoSysResource> {
  const bnd = parseStatus(await box.read("/proc/1/status")).CapBnd;
  assert.ok(!capNames(bnd).includes("CAP_SYS_RESOURCE"), `container CapBnd ${bnd}`);
  const w = await box.exec(["bash", "-c", "echo -999 > /proc/self/oom_score_adj"], {
    check: false,
  });
  assert.notEqual(w.code, 0, "root in the container could set oom_score_adj -999");
  const limits = await box.read("/proc/1/limits");
  const nofileHard = limits.split("\n").find((l) => l.startsWith("Max open files"))
    ?.split(/\s{2,}/)[2] ?? "?";
  const why = `the host refuses it (${host}); container PID 1 CapBnd ${bnd} lacks ` +
    `CAP_SYS_RESOURCE; "echo -999 > /proc/self/oom_score_adj" as root in it: ` +
    `${w.stderr.trim()}; PID 1's hard open-files limit: ${nofileHard}`;
  return { why, nofileHard };
}

/** A step runner: runs `fn` as a test step and throws when it fails (each needs the one before). */
type Step = (name: string, fn: () => Promise<void>) => Promise<void>;

/** What the steps share. */
interface Run {
  box: NspawnMachine;
  api: FakeApiServer;
  promise: UnitPromise;
  /** Set when this machine withholds CAP_SYS_RESOURCE (see {@link noSysResource}). */
  noRes?: NoSysResource;
  firstPid: string;
}

/** How many times the agent has logged adopting existing tables. */
async function adoptions(box: NspawnMachine): Promise<number> {
  const j = await agentJournal(box, UNIT);
  return j.match(/Adopting the existing kube-proxy tables/g)?.length ?? 0;
}

/** `enable --now` and what the first start must show: rules, traffic, health, sandbox. */
async function firstStart(run: Run, step: Step): Promise<void> {
  const { box } = run;
  await step("systemctl enable --now: rules, real traffic, health", async () => {
    await box.systemctl("daemon-reload");
    await box.exec(["systemctl", "enable", "--now", "kube-nft-proxy"]);
    assert.equal((await box.systemctl("is-enabled", "kube-nft-proxy")).trim(), "enabled");
    await serving(["a", "b"]);
    await reaches(topo, "tcp", NODE4, 30080, ["a", "b"]);
    await reaches(topo, "udp", "198.19.0.53", 53, ["a", "b"]);
    await reaches(topo, "tcp", "2001:db8:ffff::10", 80, ["a", "b"]);
    const h = await eventually("/healthz 200", async () => {
      const r = await httpGet("http://127.0.0.1:10256/healthz");
      return r.status === 200 ? r : undefined;
    });
    assert.equal(h.status, 200);
    const est = Deno.readTextFileSync(
      "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established",
    ).trim();
    assert.equal(est, String(23 * 3600), "the conntrack sysctl written through the sandbox");
    assert.equal(await adoptions(box), 0, "the first start adopted tables");
    run.firstPid = (await box.show(UNIT, "MainPID")).MainPID;
  });

  await step("the sandbox: seccomp filter, OOM score, capabilities", async () => {
    const asked = (await box.show(UNIT, "OOMScoreAdjust")).OOMScoreAdjust;
    console.log(`MainPID ${run.firstPid}; systemctl show: OOMScoreAdjust=${asked}`);
    const oom = await negativeOomSettable();
    run.noRes = oom.ok ? undefined : await noSysResource(box, oom.why);
    checkSandbox(await readSandbox(box, run.firstPid), run.promise, run.noRes);
  });
}

/** stop, start, SIGKILL: the rules outlive the agent and each new agent adopts them. */
async function restarts(run: Run, step: Step): Promise<void> {
  const { box, api } = run;
  await step("systemctl stop: clean, rules and traffic stay", async () => {
    await box.systemctl("stop", "kube-nft-proxy");
    await checkStopped(box, UNIT);
    assert.ok((await nftTable("ip"))?.includes("198.19.0.10"), "rules left in the kernel");
    await reaches(topo, "tcp", "198.19.0.10", 80, ["a", "b"], 5_000);
  });

  await step("systemctl start: adopts the tables and follows the API again", async () => {
    await box.systemctl("start", "kube-nft-proxy");
    await eventually(
      "the adoption logged",
      async () => {
        return (await adoptions(box)) === 1 ? true : undefined;
      },
      60_000,
      500,
    );
    const pid = (await box.show(UNIT, "MainPID")).MainPID;
    assert.notEqual(pid, run.firstPid, "a new process");
    api.apply(slice("web", [A]));
    await serving(["a"]);
    checkSandbox(await readSandbox(box, pid), run.promise, run.noRes);
  });

  await step("SIGKILL: Restart=always brings it back, and it adopts", async () => {
    assert.equal((await box.show(UNIT, "NRestarts")).NRestarts, "0", "no restart before");
    const oldPid = (await box.show(UNIT, "MainPID")).MainPID;
    await box.systemctl("kill", "--signal=SIGKILL", "kube-nft-proxy");
    await eventually(
      "a restart after RestartSec=",
      async () => {
        const st = await box.show(UNIT, "NRestarts", "ActiveState", "MainPID");
        const back = st.NRestarts === "1" && st.ActiveState === "active" && st.MainPID !== oldPid;
        return back ? st : undefined;
      },
      30_000,
      250,
    );
    await eventually(
      "the adoption logged again",
      async () => {
        return (await adoptions(box)) === 2 ? true : undefined;
      },
      60_000,
      500,
    );
    api.apply(slice("web", [A, B]));
    await serving(["a", "b"]);
  });

  await step("the journal: no permission error, no error line", async () => {
    checkAgentJournal(await agentJournal(box, UNIT));
  });
}

Deno.test({
  name: "systemd: the unit under a real systemd in the node namespace",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    if (!ROOT) throw new Error("KNP_SYSTEMD_RUN_ROOT is not set: run tests/e2e/systemd_test.ts");
    const api = cluster();
    const installed = await installAgent(ROOT, AGENT_ARGS, api.kubeconfigYaml());
    console.log(`installed: binary ${installed.variant}; ${installed.argsLine}`);
    const consoleLog = Deno.makeTempFileSync({ prefix: "knp-nspawn-", suffix: ".log" });
    let m: NspawnMachine | undefined;
    let ok = false;
    try {
      const t0 = Date.now();
      m = await NspawnMachine.boot(ROOT, topo.node.name, consoleLog, HOST_MNT);
      console.log(`booted to "running" in ${Date.now() - t0} ms (systemd pid ${m.systemdPid})`);
      const step: Step = async (name, fn) => {
        if (!(await t.step(name, fn))) throw new Error(`step failed: ${name}`);
      };
      const promise = unitPromise(Deno.readTextFileSync(UNIT_SOURCE));
      const run: Run = { box: m, api, promise, firstPid: "" };
      await firstStart(run, step);
      await restarts(run, step);
      ok = true;
    } finally {
      if (m) {
        if (!ok) console.error(`journal:\n${(await m.journal(UNIT).catch((e) => e)).toString()}`);
        const code = await m.poweroff();
        console.log(`systemctl poweroff: systemd-nspawn exited ${code}`);
        if (ok) assert.equal(code, 0, "nspawn's exit after poweroff");
      }
      if (!ok) console.error(`console (${consoleLog}):\n${readTail(consoleLog)}`);
      Deno.removeSync(consoleLog);
      await api.close();
    }
  },
});
