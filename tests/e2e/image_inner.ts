/**
 * The image e2e, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/image_test.ts (env KNP_TOPO, and KNP_IMAGE_TAG = the image it built). The fake API
 * server listens on the node's 127.0.0.1; the agent runs from the image under podman, its
 * container joined to the node namespace (`--network ns:/run/netns/<node>`, NET_ADMIN only),
 * the kubeconfig mounted read-only. Real traffic from the client namespace proves what the
 * container programs. Not a *_test.ts file on purpose: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { FakeApiServer, type KObject } from "../fakeapi/server.ts";
import * as bench from "../support/cluster.ts";
import { CLIENT4 } from "../topology.ts";
import { freePort } from "./fixtures/agent_process.ts";
import { agentFlags, waitHealthy } from "./fixtures/agent_under_test.ts";
import {
  Container,
  type ContainerOptions,
  removeTestContainers,
  testRunId,
} from "./fixtures/container.ts";
import {
  attachTopology,
  fails,
  nftTable,
  node,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/image_test.ts");
const IMAGE = Deno.env.get("KNP_IMAGE_TAG") ?? "";
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.10", DNS = "198.19.0.53", WEB6 = "2001:db8:ffff::10";
/** Where the container finds the kubeconfig (mounted read-only). */
const KUBECONFIG = "/etc/kubernetes/kube-nft-proxy.kubeconfig";
const BIN = "/usr/local/bin/kube-nft-proxy";

let seq = 0;
/** A container of the image in the node namespace, with the kubeconfig mounted. */
function options(kubeconfig: string, args: string[], readOnly = false): ContainerOptions {
  return {
    image: IMAGE,
    name: `knp-${testRunId()}-${seq++}`,
    network: { netns: topo.node.name },
    mounts: { [kubeconfig]: KUBECONFIG },
    readOnly,
    args,
  };
}

/** The agent's flags (connection, this node, ports on the node's loopback). */
function agentArgs(healthzPort: number, metricsPort: number): string[] {
  return agentFlags(KUBECONFIG, healthzPort, metricsPort, {
    minSyncPeriod: "200ms",
    args: ["--v=2"],
  });
}

/** Waits for /healthz 200, failing early with the container's output if it exits. */
function healthy(c: Container, healthzPort: number, timeoutMs = 60_000): Promise<void> {
  return waitHealthy(c, `http://127.0.0.1:${healthzPort}`, "/healthz 200", timeoutMs, 200);
}

/** VmRSS and VmHWM (peak) of a host process, in MB. */
function memoryMB(pid: number): { rss: number; peak: number } {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

/** Regex source matching `s` literally. */
function lit(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The cluster of the traffic checks: TCP, UDP and IPv6 ClusterIP Services over pods a and b. */
function cluster(): KObject[] {
  return [
    node(),
    serviceCIDR(),
    service("web", { ip: WEB }),
    slice("web", [A, B]),
    service("dns", { ip: DNS, port: 53, protocol: "UDP" }),
    slice("dns", [A, B], "UDP"),
    service("web6", { ip: WEB6 }),
    slice("web6", [topo.podIPv6(0), topo.podIPv6(1)]),
  ];
}

/** What the steps share: the API server, the kubeconfig and the agent's flags and port. */
interface Run {
  api: FakeApiServer;
  kubeconfig: string;
  args: string[];
  healthzPort: number;
}

/** The container's process is the agent itself (the launcher exec'd it) and has no children. */
async function onlyTheAgent(c: Container): Promise<void> {
  const pid = await c.hostPid();
  const cmdline = Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0");
  // The compiled binary, or deno running the bundle (the launcher replaced itself).
  assert.ok(
    cmdline[0] === BIN || cmdline.includes("/usr/local/lib/kube-nft-proxy/bundle/main.js"),
    `pid ${pid} runs ${cmdline.join(" ")}`,
  );
  const top = await c.exec([BIN, "--version"]);
  assert.equal(top.code, 0, top.stderr);
  assert.match(top.stdout, /^kube-nft-proxy v\d/);
  const children = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`).trim();
  assert.equal(children, "", `the agent has child processes: ${children}`);
}

/** `trace` and `explain` run in the container and name web's remaining endpoint only. */
async function traceAndExplain(c: Container): Promise<void> {
  const tr = await c.exec([BIN, "trace", "--from", CLIENT4, "--to", `${WEB}:80/tcp`]);
  assert.equal(tr.code, 0, `trace failed:\n${tr.stdout}\n${tr.stderr}`);
  assert.match(tr.stdout, new RegExp(`${lit(B)}:8080`), tr.stdout);
  assert.doesNotMatch(tr.stdout, new RegExp(`${lit(A)}:8080`), tr.stdout);
  const ex = await c.exec([BIN, "explain", "default/web"]);
  assert.equal(ex.code, 0, `explain failed:\n${ex.stdout}\n${ex.stderr}`);
  assert.match(ex.stdout, /default\/web/, ex.stdout);
  assert.match(ex.stdout, new RegExp(lit(WEB)), ex.stdout);
  assert.match(ex.stdout, new RegExp(lit(B)), ex.stdout);
  console.log(
    `--- trace in the container ---\n${tr.stdout}\n--- explain ---\n${ex.stdout}`,
  );
}

/** A second container with a read-only root adopts the tables, serves and stops cleanly. */
async function adoptsReadOnly(ctx: Run, box: { c: Container }): Promise<void> {
  box.c = Container.start(options(ctx.kubeconfig, ctx.args, true));
  await box.c.waitForLine(/Adopting the existing kube-proxy tables/, 60_000);
  await healthy(box.c, ctx.healthzPort);
  await reaches(topo, "tcp", WEB, 80, ["b"]);
  ctx.api.apply(slice("web", [A, B]));
  await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
  await reaches(topo, "udp", DNS, 53, ["a", "b"]);
  const st = await box.c.stop();
  assert.equal(st.code, 0, box.c.tail());
  // Deno's cache (DENO_DIR, under HOME) is optional: nothing may complain that it is not
  // writable. (The agent's own note that /proc/sys is read-only is expected: docs/deploy.md.)
  const ro = box.c.lines.filter((l) =>
    /read-only file system|os error 30|EROFS/i.test(l.text) && !l.text.includes("/proc/sys")
  );
  assert.deepEqual(ro, [], "complaints about the read-only root");
}

/** RSS of the image's agent at 1k Services x 10 endpoints, reported (a sanity bound only). */
async function memoryAt1k(ctx: Run, box: { c: Container }): Promise<void> {
  await ctx.api.close();
  const big = FakeApiServer.start({ bookmarkIntervalMs: 500 });
  Deno.writeTextFileSync(ctx.kubeconfig, big.kubeconfigYaml());
  try {
    big.apply(node());
    big.apply(bench.serviceCIDR());
    for (let i = 0; i < 1000; i++) {
      big.apply(bench.service(i));
      big.apply(bench.slice(i, bench.initialEndpoints(i, 10)));
    }
    box.c = Container.start(options(ctx.kubeconfig, ctx.args));
    await healthy(box.c, ctx.healthzPort, 120_000);
    await box.c.waitForLine(
      /SyncProxyRules complete.*ipFamily="IPv4".*services=1000\b/,
      60_000,
    );
    const pid = await box.c.hostPid();
    const first = memoryMB(pid);
    await new Promise((r) => setTimeout(r, 10_000));
    const later = memoryMB(pid);
    console.log(
      `image RSS at 1k x 10: ${later.rss.toFixed(0)} MB after 10 s at rest ` +
        `(${first.rss.toFixed(0)} MB right after the first sync), peak ${
          later.peak.toFixed(0)
        } MB (VmRSS/VmHWM of host pid ${pid})`,
    );
    assert.ok(later.rss > 20 && later.rss < 1024, `implausible RSS ${later.rss} MB`);
    const st = await box.c.stop();
    assert.equal(st.code, 0, box.c.tail());
    const r = await Container.run(options(ctx.kubeconfig, ["--cleanup"]));
    assert.equal(r.code, 0, r.output);
  } finally {
    await big.close();
  }
}

Deno.test({
  name: "image: the agent in a container, programming the node namespace",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    assert.ok(IMAGE, "KNP_IMAGE_TAG is not set: run this through tests/e2e/image_test.ts");
    const api = FakeApiServer.start({ bookmarkIntervalMs: 500 });
    const kubeconfig = api.writeKubeconfig();
    const healthzPort = freePort(), metricsPort = freePort();
    const args = agentArgs(healthzPort, metricsPort);
    for (const o of cluster()) api.apply(o);
    const run: Run = { api, kubeconfig, args, healthzPort };
    const box = { c: Container.start(options(kubeconfig, args)) };
    try {
      await t.step(
        "the container starts and /healthz turns 200",
        () => healthy(box.c, healthzPort),
      );

      await t.step("TCP, UDP and IPv6 Services are reachable from the client", async () => {
        await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
        await reaches(topo, "udp", DNS, 53, ["a", "b"]);
        await reaches(topo, "tcp", WEB6, 80, ["a", "b"]);
      });

      await t.step(
        "the container's only process is the agent (exec, no wrapper)",
        () => onlyTheAgent(box.c),
      );

      await t.step("an endpoint change is reprogrammed", async () => {
        api.apply(slice("web", [B]));
        await reaches(topo, "tcp", WEB, 80, ["b"]);
      });

      await t.step(
        "trace and explain inside the container name the Service and endpoints",
        () => traceAndExplain(box.c),
      );

      await t.step("SIGTERM (podman stop): exit 0, rules and traffic stay", async () => {
        const st = await box.c.stop();
        assert.equal(st.code, 0, box.c.tail());
        assert.ok((await nftTable("ip"))?.includes(WEB), "ip rules gone after SIGTERM");
        assert.ok(await nftTable("ip6"), "ip6 table gone after SIGTERM");
        await reaches(topo, "tcp", WEB, 80, ["b"]);
        await reaches(topo, "udp", DNS, 53, ["a", "b"]);
      });

      await t.step(
        "a second container (read-only root) adopts the tables and serves",
        () => adoptsReadOnly(run, box),
      );

      await t.step("--cleanup in a container removes our tables", async () => {
        const r = await Container.run(options(kubeconfig, ["--cleanup"]));
        assert.equal(r.code, 0, r.output);
        assert.equal(await nftTable("ip"), undefined, "ip kube-proxy still there");
        assert.equal(await nftTable("ip6"), undefined, "ip6 kube-proxy still there");
        await fails(topo, WEB, 80);
      });

      if (Deno.env.get("KNP_IMAGE_RSS") !== "0") {
        await t.step("memory at 1k Services x 10 endpoints (reported)", () => memoryAt1k(run, box));
      }
    } catch (err) {
      console.error(`--- container output (last lines) ---\n${box.c.tail(80)}`);
      throw err;
    } finally {
      await box.c.stop(5).catch(() => {});
      await removeTestContainers();
      await api.close().catch(() => {});
      await Deno.remove(kubeconfig).catch(() => {});
    }
  },
});
