/**
 * Drop-in e2e, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/dropin_test.ts (env KNP_TOPO; pods 0 and 1 run echo servers "a" and "b" on TCP 8080).
 *
 * The agent is started with upstream's own command lines, from agent/testdata: kubeadm's
 * DaemonSet command (`--config=<mount>/config.conf --hostname-override=<node>`) reading kubeadm's
 * config.conf from a ConfigMap-style mount, then the same mount updated to kubeadm's config in
 * v1alpha2, then the kube-up addon's flag list. The config files change only where a test must:
 * the kubeconfig path (the fake API server's), the pod CIDR (test address ranges) and
 * conntrack.maxPerCore (0: nf_conntrack_max is host-wide, see NETNS_SAFE_FLAGS). The servers
 * listen on upstream's default ports, which are free in the node namespace.
 * @module
 */
import assert from "node:assert/strict";
import { FakeApiServer } from "../fakeapi/server.ts";
import { run } from "../netns.ts";
import { NODE4 } from "../topology.ts";
import { AgentProcess, eventually, httpGet, NETNS_SAFE_FLAGS } from "./fixtures/agent_process.ts";
import { waitHealthy } from "./fixtures/agent_under_test.ts";
import { attachTopology, node, NODE_NAME, service, slice } from "./fixtures/inner_steps.ts";
import { addonArgs, fixturePath, kubeadmArgs } from "../../agent/testdata/manifests.ts";

const HEALTHZ = "http://127.0.0.1:10256", METRICS = "http://127.0.0.1:10249";

const topo = attachTopology("tests/e2e/dropin_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);

/** A kubeadm fixture with the test's kubeconfig, pod CIDR and conntrack sizing. */
function forTest(fixture: string, kubeconfig: string): string {
  return Deno.readTextFileSync(fixturePath(fixture))
    .replace("/var/lib/kube-proxy/kubeconfig.conf", kubeconfig)
    .replaceAll("10.244.0.0/16", "198.18.1.0/24")
    .replace(/^(\s+)maxPerCore: null$/m, "$1maxPerCore: 0");
}

/**
 * A ConfigMap volume as kubelet lays it out: `config.conf -> ..data/config.conf`, `..data` a
 * symlink to a timestamped directory, swapped by rename on every update.
 */
class ConfigMapMount {
  #gen = 0;
  constructor(readonly dir: string) {}
  get path(): string {
    return `${this.dir}/config.conf`;
  }
  write(content: string): void {
    const gen = `..gen_${++this.#gen}`;
    Deno.mkdirSync(`${this.dir}/${gen}`);
    Deno.writeTextFileSync(`${this.dir}/${gen}/config.conf`, content);
    Deno.symlinkSync(gen, `${this.dir}/..data_tmp`);
    Deno.renameSync(`${this.dir}/..data_tmp`, `${this.dir}/..data`);
    if (this.#gen === 1) Deno.symlinkSync("..data/config.conf", this.path);
    else Deno.removeSync(`${this.dir}/..gen_${this.#gen - 1}`, { recursive: true });
  }
}

/** Waits until TCP from the client namespace to host:80 gets answers from exactly `expect`. */
function reaches(host: string, expect: string[], timeoutMs = 15_000): Promise<true> {
  return eventually(
    `client -> ${host}:80 reaching ${expect}`,
    async () => {
      const rs = await topo.request(topo.client, "tcp", host, 80, 12, 1500);
      if (!rs.every((r) => "reply" in r)) return undefined;
      const seen = [...new Set(rs.map((r) => ("reply" in r ? r.reply.split(" ")[0] : "")))].sort();
      return JSON.stringify(seen) === JSON.stringify([...expect].sort()) ? true : undefined;
    },
    timeoutMs,
    200,
  );
}

/** Connects to host:80 from this (the node's) namespace every 50 ms; records what fails. */
class Prober {
  attempts = 0;
  readonly failures: string[] = [];
  #running = true;
  readonly #done: Promise<void>;
  constructor(host: string) {
    this.#done = this.#loop(host);
  }
  async #loop(host: string): Promise<void> {
    while (this.#running) {
      const t0 = Date.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const reply = await Promise.race([
          Deno.connect({ hostname: host, port: 80 }).then((c) => new Response(c.readable).text()),
          new Promise<string>((
            _,
            rej,
          ) => (timer = setTimeout(() => rej(new Error("timeout")), 1000))),
        ]);
        if (!/^[ab] /.test(reply)) this.failures.push(`${t0}: reply ${JSON.stringify(reply)}`);
      } catch (err) {
        this.failures.push(`${t0}: ${(err as Error).message}`);
      } finally {
        clearTimeout(timer);
      }
      this.attempts++;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  async stop(): Promise<void> {
    this.#running = false;
    await this.#done;
  }
}

/** What the steps share: the API server, the ConfigMap mount, and the agent a step may replace. */
interface Ctx {
  api: FakeApiServer;
  kubeconfig: string;
  mount: ConfigMapMount;
  start: (argv: string[]) => AgentProcess;
  kubeadm: string[];
  agent: AgentProcess;
}

/** kubeadm's command line and config.conf, a config edit, the start-up Event. */
async function kubeadmSteps(t: Deno.TestContext, ctx: Ctx): Promise<void> {
  const { api, kubeconfig } = ctx;
  await t.step("kubeadm's DaemonSet command and v1alpha1 config.conf: it serves", async () => {
    await waitHealthy(ctx.agent, HEALTHZ);
    await reaches("198.19.0.10", ["a", "b"]);
  });

  await t.step(
    "the metrics port serves upstream's /proxyMode, /healthz, /configz",
    async () => {
      assert.deepEqual(await httpGet(`${METRICS}/proxyMode`), {
        status: 200,
        body: "nftables",
      });
      assert.deepEqual(await httpGet(`${METRICS}/healthz`), { status: 200, body: "ok" });
      const cz = await httpGet(`${METRICS}/configz`);
      assert.equal(cz.status, 200, cz.body);
      const c = JSON.parse(cz.body)["kubeproxy.config.k8s.io"];
      assert.equal(c.Mode, "nftables");
      assert.equal(c.HostnameOverride, NODE_NAME);
      assert.equal(c.ClientConnection.Kubeconfig, kubeconfig);
      assert.deepEqual(c.DetectLocal.ClusterCIDRs, ["198.18.1.0/24"]);
      assert.equal(c.HealthzBindAddress, "0.0.0.0:10256");
      assert.equal(c.MinSyncPeriod, "1s");
    },
  );

  await t.step("the start-up Event reaches the API server", async () => {
    const ev = await eventually(
      "the Starting event",
      () =>
        api.events.find((e) =>
          e.reason === "Starting" && (e.regarding as { name?: string })?.name === NODE_NAME
        ),
    );
    assert.equal(ev.action, "StartKubeProxy");
    assert.equal(ev.reportingController, "kube-proxy");
    assert.equal(ev.type, "Normal");
  });
}

/** Config edits and the addon's command line. */
async function editSteps(t: Deno.TestContext, ctx: Ctx): Promise<void> {
  const { api, kubeconfig, mount, start, kubeadm } = ctx;
  await t.step(
    "a ConfigMap update: exit 1, restart reads v1alpha2, no traffic gap",
    async () => {
      const prober = new Prober("198.19.0.10");
      await new Promise((r) => setTimeout(r, 500));
      const from = ctx.agent.lines.length;
      mount.write(
        forTest("./kubeadm-kube-proxy-v1alpha2.conf", kubeconfig)
          .replace(/^minSyncPeriod: 0s$/m, "minSyncPeriod: 250ms"),
      );
      const st = await Promise.race([
        ctx.agent.status,
        new Promise<undefined>((r) => setTimeout(() => r(undefined), 20_000)),
      ]);
      assert.ok(st, `the agent did not exit after the edit\n${ctx.agent.tail()}`);
      assert.equal(st.code, 1, ctx.agent.tail());
      await ctx.agent.waitForLine(/The configuration file changed; exiting/, 1000, from);
      // The DaemonSet's restart: the rules serve meanwhile.
      await new Promise((r) => setTimeout(r, 1000));
      ctx.agent = start(kubeadm);
      await ctx.agent.waitForLine(/Adopting the existing kube-proxy tables/, 30_000);
      await waitHealthy(ctx.agent, HEALTHZ);
      await new Promise((r) => setTimeout(r, 500));
      await prober.stop();
      assert.ok(prober.attempts > 20, `only ${prober.attempts} probes`);
      assert.deepEqual(prober.failures, [], "connections failed during the restart");
      const c = JSON.parse((await httpGet(`${METRICS}/configz`)).body)["kubeproxy.config.k8s.io"];
      assert.equal(c.MinSyncPeriod, "250ms");
      // v1alpha2's default lists: healthz on [::] (IPv4 too), metrics on both loopbacks.
      assert.equal((await httpGet("http://[2001:db8::1]:10256/healthz")).status, 200);
      assert.equal((await httpGet(`http://${NODE4}:10256/healthz`)).status, 200);
      assert.equal((await httpGet("http://[::1]:10249/proxyMode")).body, "nftables");
      assert.equal((await httpGet(`http://${NODE4}:10249/proxyMode`)).status, 0, "not exposed");
      api.apply(service("after", { ip: "198.19.0.20" }));
      api.apply(slice("after", [A]));
      await reaches("198.19.0.20", ["a"]);
      const stop = await ctx.agent.stop("SIGTERM");
      assert.equal(stop.code, 0, ctx.agent.tail());
    },
  );

  await t.step(
    "the kube-up addon's flag list: it serves; unknown-here flags warn",
    async () => {
      // The addon passes no --hostname-override: on its nodes the host name is the Node's name.
      api.apply(node(Deno.hostname().trim().toLowerCase()));
      ctx.agent = start(addonArgs([`--kubeconfig=${kubeconfig}`, ...NETNS_SAFE_FLAGS]));
      await waitHealthy(ctx.agent, HEALTHZ);
      await ctx.agent.waitForLine(
        (l) =>
          l.stream === "stderr" &&
          l.text.includes(
            "flag --oom-score-adj is accepted for compatibility and has no effect",
          ),
        5000,
      );
      await reaches("198.19.0.10", ["a", "b"]);
      const c = JSON.parse((await httpGet(`${METRICS}/configz`)).body)["kubeproxy.config.k8s.io"];
      assert.equal(c.SyncPeriod, "1m0s");
      assert.equal(c.MinSyncPeriod, "10s");
      assert.equal(c.DetectLocalMode, "NodeCIDR");
      const stop = await ctx.agent.stop("SIGTERM");
      assert.equal(stop.code, 0, ctx.agent.tail());
    },
  );
}

/** A taken metrics port, and --cleanup. */
async function failureSteps(t: Deno.TestContext, ctx: Ctx): Promise<void> {
  const { api, start, kubeadm } = ctx;
  await t.step("a taken metrics port: exit 1 and upstream's Warning event", async () => {
    const taken = Deno.listen({ hostname: "127.0.0.1", port: 10249 });
    try {
      ctx.agent = start(kubeadm);
      const st = await ctx.agent.status;
      assert.equal(st.code, 1, ctx.agent.tail());
      const ev = api.events.find((e) => e.reason === "FailedToStartMetricServer");
      assert.ok(ev, `no FailedToStartMetricServer event: ${JSON.stringify(api.events)}`);
      assert.equal(ev.type, "Warning");
      assert.equal(ev.action, "StartKubeProxy");
      assert.match(String(ev.note), /in use/i);
    } finally {
      taken.close();
    }
  });

  await t.step("--cleanup removes the tables", async () => {
    const r = await AgentProcess.run(["--cleanup"]);
    assert.equal(r.code, 0, r.output);
    const tables = await run(["nft", "list", "tables"]);
    assert.ok(!tables.stdout.includes("kube-proxy"), tables.stdout);
  });
}

Deno.test({
  name: "drop-in: kubeadm's and the addon's command lines, v1alpha1 and v1alpha2, config edits",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const api = FakeApiServer.start({ bookmarkIntervalMs: 500 });
    const kubeconfig = api.writeKubeconfig();
    const mount = new ConfigMapMount(Deno.makeTempDirSync({ prefix: "knp-kube-proxy-cm-" }));
    api.apply(node(NODE_NAME));
    api.apply(service("web", { ip: "198.19.0.10" }));
    api.apply(slice("web", [A, B]));

    const log = Deno.env.get("KNP_AGENT_LOG");
    const logFile = log ? await Deno.open(log, { create: true, append: true }) : undefined;
    const enc = new TextEncoder();
    const start = (argv: string[]) =>
      AgentProcess.start(argv, {
        echo: (l) => logFile?.writeSync(enc.encode(`[${l.stream}] ${l.text}\n`)),
      });
    mount.write(forTest("./kubeadm-kube-proxy.conf", kubeconfig));
    const kubeadm = kubeadmArgs(NODE_NAME, mount.path);
    const ctx: Ctx = { api, kubeconfig, mount, start, kubeadm, agent: start(kubeadm) };
    try {
      await kubeadmSteps(t, ctx);
      await editSteps(t, ctx);
      await failureSteps(t, ctx);
    } catch (err) {
      console.error(`--- agent output (last lines) ---\n${ctx.agent.tail(80)}`);
      throw err;
    } finally {
      await ctx.agent.stop("SIGTERM", 5000);
      logFile?.close();
      await api.close();
      await Deno.remove(kubeconfig).catch(() => {});
      await Deno.remove(mount.dir, { recursive: true }).catch(() => {});
    }
  },
});
