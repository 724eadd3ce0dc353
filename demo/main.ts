/**
 * The demo: the real agent against an example cluster (demo/cluster.yaml) served by the fake
 * API server, no Kubernetes needed. `./denow task demo` (or `deno run -A demo/main.ts`).
 *
 * - With root, iproute2 and the native libraries: builds throwaway network namespaces (a node,
 *   an off-node client and two pods running echo servers, see tests/topology.ts), re-runs
 *   itself inside the node namespace with the fake API server and the agent, sends real traffic
 *   and prints one line per check, then the programmed dispatch (class sets, `service-ips`)
 *   read back through the libnftables FFI client. Everything is deleted at the end (also on Ctrl-C). Exit 0 when every
 *   check passed, 1 otherwise.
 * - Otherwise (or with `--dry-run`): says what is missing and prints the nft transactions the
 *   agent would apply, from a `--dry-run` agent. Exit 0.
 *
 * Nothing here touches the host's own network namespace: kernel work happens only inside the
 * node namespace the demo creates.
 * @module
 */
import { parseAllDocuments } from "yaml";
import { FakeApiServer, type KObject } from "../tests/fakeapi/server.ts";
import { denoBin, realKernelUnavailable } from "../tests/netns.ts";
import {
  assertInNetns,
  CLIENT4,
  NODE4,
  type ProbeResult,
  Topology,
  type TopologyNames,
} from "../tests/topology.ts";
import { AgentProcess, eventually, httpGet } from "../tests/e2e/fixtures/agent_process.ts";
import { startAgent } from "../tests/e2e/fixtures/agent_under_test.ts";
import { LIBRARY_PACKAGES, openLibrary } from "../ffi/libpath.ts";

const CLUSTER_FILE = new URL("./cluster.yaml", import.meta.url).pathname;
const SELF = new URL(import.meta.url).pathname;
const NODE_NAME = "knp-demo-node";
const INNER_ENV = "KNP_DEMO_INNER";
const USAGE = `usage: deno run -A demo/main.ts [--dry-run]
  Runs kube-nft-proxy against demo/cluster.yaml (fake API server) in throwaway network
  namespaces and shows real traffic. --dry-run (or no root / iproute2 / libraries) prints
  the nft transactions the agent would apply instead.`;

/** The objects of demo/cluster.yaml, in file order. */
export function loadCluster(path = CLUSTER_FILE): KObject[] {
  const docs = parseAllDocuments(Deno.readTextFileSync(path));
  const out: KObject[] = [];
  for (const [i, doc] of docs.entries()) {
    if (doc.errors.length > 0) {
      throw new Error(`${path}: document ${i + 1}: ${doc.errors[0].message}`);
    }
    const obj = doc.toJSON();
    if (obj === null || obj === undefined) continue;
    if (typeof obj !== "object" || typeof obj.kind !== "string") {
      throw new Error(`${path}: document ${i + 1} is not a Kubernetes object (no kind)`);
    }
    out.push(obj as KObject);
  }
  return out;
}

/** Why the real-traffic demo cannot run here, or undefined. */
function whyNoKernel(): string | undefined {
  const why = realKernelUnavailable();
  if (why) return why.replace("real-kernel tests need", "the real demo needs");
  for (const tool of ["sysctl"]) {
    const found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].some((d) => {
      try {
        return Deno.statSync(`${d}/${tool}`).isFile;
      } catch {
        return false;
      }
    });
    if (!found) return `the real demo needs \`${tool}\` (procps)`;
  }
  // Loading a library does not touch the kernel; it only proves the agent could start.
  for (const soname of [...Object.keys(LIBRARY_PACKAGES), "libmnl.so.0"]) {
    try {
      openLibrary(soname, {}, LIBRARY_PACKAGES[soname] ?? "Debian/Ubuntu: libmnl0").close();
    } catch (err) {
      return (err as Error).message;
    }
  }
  return undefined;
}

function kubeconfigFor(api: FakeApiServer): string {
  return api.writeKubeconfig();
}

// ---------------------------------------------------------------------------------------------
// Dry run: print what the agent would program.

async function dryRun(): Promise<number> {
  const api = FakeApiServer.start();
  for (const o of loadCluster()) api.apply(o);
  const kubeconfig = kubeconfigFor(api);
  const agent = AgentProcess.start([
    `--kubeconfig=${kubeconfig}`,
    `--hostname-override=${NODE_NAME}`,
    "--cluster-cidr=198.18.1.0/24,2001:db8:1::/64",
    "--dry-run",
  ]);
  try {
    // One transaction per IP family; then let the output settle.
    for (const fam of ["ip", "ip6"]) {
      await agent.waitForLine(new RegExp(`^# dry run: \\d+ operations on ${fam} kube-proxy$`));
    }
    let n = -1;
    while (n !== agent.lines.length) {
      n = agent.lines.length;
      await new Promise((r) => setTimeout(r, 300));
    }
  } finally {
    await agent.stop("SIGTERM");
    await api.close();
    await Deno.remove(kubeconfig).catch(() => {});
  }
  const klog = /^[IWEF]\d{4} \d\d:\d\d:\d\d/;
  for (const l of agent.lines) {
    if (l.stream === "stdout" && !klog.test(l.text)) console.log(l.text);
  }
  const errors = agent.lines.filter((l) => l.stream === "stderr" && /^E/.test(l.text));
  if (errors.length) {
    console.log("\n# The agent logged (and skipped) these objects:");
    for (const e of errors) console.log(`#   ${e.text.replace(/^\S+ \S+ +\d+ [^\]]*\] /, "")}`);
  }
  await debugExamples([
    "--dry-run",
    `--objects=${CLUSTER_FILE}`,
    `--hostname-override=${NODE_NAME}`,
    "--cluster-cidr=198.18.1.0/24,2001:db8:1::/64",
  ]);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Real run, outside: namespaces and echo servers, then re-run inside the node namespace.

async function realOutside(): Promise<number> {
  let inner: Deno.ChildProcess | undefined;
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    try {
      inner?.kill("SIGTERM");
    } catch { /* already gone */ }
  };
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  // Before any namespace exists, so Ctrl-C at any point still reaches the cleanup below.
  for (const s of signals) Deno.addSignalListener(s, onSignal);
  console.log("Building namespaces: node, client, pods a (198.18.1.2) and b (198.18.1.3)...");
  let topo: Topology;
  try {
    topo = await Topology.create({ pods: 2, tag: "demo" });
  } catch (err) {
    for (const s of signals) Deno.removeSignalListener(s, onSignal);
    if (interrupted) return 130; // Ctrl-C killed one of its `ip` commands; it cleaned up
    throw err;
  }
  try {
    try {
      await topo.startEcho(0, "a", 8080, 5353);
      await topo.startEcho(1, "b", 8080, 5353);
    } catch (err) {
      if (interrupted) return 130;
      throw err;
    }
    if (interrupted) return 130;
    inner = topo.node.spawn([
      "env",
      `${INNER_ENV}=${JSON.stringify(topo.names())}`,
      denoBin,
      "run",
      "-A",
      SELF,
    ], { stdout: "inherit", stderr: "inherit" });
    const { code } = await inner.status;
    return interrupted ? 130 : code;
  } finally {
    for (const s of signals) Deno.removeSignalListener(s, onSignal);
    await topo.close();
    console.log("Deleted the demo namespaces.");
  }
}

// ---------------------------------------------------------------------------------------------
// Real run, inside the node namespace.

interface Check {
  name: string;
  path: string;
  expect: string;
  got: string;
  ok: boolean;
}

function summarize(rs: ProbeResult[]): { labels: Map<string, number>; peers: Set<string> } {
  const labels = new Map<string, number>();
  const peers = new Set<string>();
  for (const r of rs) {
    const key = "reply" in r ? r.reply.split(" ")[0] : r.error;
    labels.set(key, (labels.get(key) ?? 0) + 1);
    if ("reply" in r) peers.add(r.reply.split(" ")[1]);
  }
  return { labels, peers };
}

function counts(labels: Map<string, number>): string {
  return [...labels].sort().map(([k, n]) => `${k}:${n}`).join(" ");
}

/** One probe of the demo: real requests from a namespace, and what must come back. */
interface Probe {
  name: string;
  from: "client" | "node";
  proto: "tcp" | "udp";
  host: string;
  port: number;
  count: number;
  expect: string;
  judge: (s: ReturnType<typeof summarize>, rs: ProbeResult[]) => boolean;
  describe?: (s: ReturnType<typeof summarize>, rs: ProbeResult[]) => string;
}

/** Whether exactly the pods `want` answered. */
const only = (s: ReturnType<typeof summarize>, want: string[]) =>
  [...s.labels.keys()].sort().join() === [...want].sort().join();

/** The demo's probes, in the order they run. */
const PROBES: Probe[] = [
  {
    name: "ClusterIP web (TCP)",
    from: "client",
    proto: "tcp",
    host: "198.19.0.10",
    port: 80,
    count: 12,
    expect: "both pods answer",
    judge: (s) => only(s, ["a", "b"]),
  },
  {
    name: "ClusterIP dns (UDP)",
    from: "client",
    proto: "udp",
    host: "198.19.0.53",
    port: 53,
    count: 12,
    expect: "both pods answer",
    judge: (s) => only(s, ["a", "b"]),
  },
  {
    name: "sticky (ClientIP)",
    from: "client",
    proto: "tcp",
    host: "198.19.0.11",
    port: 80,
    count: 10,
    expect: "one pod, every time",
    judge: (s) =>
      s.labels.size === 1 && !s.labels.has("Timeout") && !s.labels.has("ConnectionRefused"),
  },
  {
    name: "NodePort web",
    from: "client",
    proto: "tcp",
    host: NODE4,
    port: 30080,
    count: 6,
    expect: `pods see the node IP ${NODE4} (masqueraded)`,
    judge: (s) =>
      [...s.labels.keys()].every((l) => l === "a" || l === "b") && s.peers.size === 1 &&
      s.peers.has(NODE4),
  },
  {
    name: "LB local (eTP=Local)",
    from: "client",
    proto: "tcp",
    host: "198.18.2.100",
    port: 80,
    count: 6,
    expect: `only local pod a, sees client IP ${CLIENT4}`,
    judge: (s) => only(s, ["a"]) && s.peers.size === 1 && s.peers.has(CLIENT4),
  },
  {
    name: "empty (no endpoints)",
    from: "client",
    proto: "tcp",
    host: "198.19.0.13",
    port: 80,
    count: 1,
    expect: "connection refused at once",
    judge: (_s, rs) => "error" in rs[0] && rs[0].error === "ConnectionRefused" && rs[0].ms < 1000,
    describe: (
      _s,
      rs,
    ) => ("error" in rs[0] ? `${rs[0].error} after ${rs[0].ms.toFixed(0)} ms` : "a reply"),
  },
  {
    name: "IPv6 ClusterIP web6",
    from: "client",
    proto: "tcp",
    host: "2001:db8:ffff::10",
    port: 80,
    count: 12,
    expect: "both pods answer",
    judge: (s) => only(s, ["a", "b"]),
  },
  {
    name: "node -> ClusterIP web",
    from: "node",
    proto: "tcp",
    host: "198.19.0.10",
    port: 80,
    count: 12,
    expect: "both pods answer",
    judge: (s) => only(s, ["a", "b"]),
  },
];

/** Sends one probe's requests and prints its PASS/FAIL line. */
async function runProbe(topo: Topology, p: Probe): Promise<Check> {
  const ns = p.from === "client" ? topo.client : topo.node;
  const rs = await topo.request(ns, p.proto, p.host, p.port, p.count, 2000);
  const s = summarize(rs);
  const shown = p.host.includes(":") ? `[${p.host}]:${p.port}` : `${p.host}:${p.port}`;
  const got = p.describe ? p.describe(s, rs) : `${counts(s.labels)}  pods saw ${[...s.peers]}`;
  const c = {
    name: p.name,
    path: `${p.from} -> ${p.proto} ${shown}`,
    expect: p.expect,
    got,
    ok: p.judge(s, rs),
  };
  console.log(
    `${c.ok ? "PASS" : "FAIL"}  ${c.name.padEnd(24)} ${c.path.padEnd(36)} ${c.got}` +
      (c.ok ? "" : `   (expected: ${c.expect})`),
  );
  return c;
}

/** Whether the agent logged the malformed Service by name (and skipped it); prints the line. */
function malformedCheck(agent: AgentProcess): Check {
  const broken = agent.lines.find((l) =>
    l.stream === "stderr" && l.text.includes("default/broken")
  );
  const c: Check = {
    name: "malformed Service",
    path: "default/broken (198.19.0.300)",
    expect: "logged and skipped",
    got: broken ? "logged and skipped" : "not logged",
    ok: broken !== undefined,
  };
  console.log(`${c.ok ? "PASS" : "FAIL"}  ${c.name.padEnd(24)} ${c.path.padEnd(36)} ${c.got}`);
  return c;
}

async function realInside(names: TopologyNames): Promise<number> {
  assertInNetns(names.node);
  const topo = Topology.attach(names);
  const aut = startAgent({
    objects: loadCluster(),
    bookmarkIntervalMs: 1000,
    nodeName: NODE_NAME,
    minSyncPeriod: "200ms",
  });
  const { agent } = aut;
  let stopping = false;
  const onSignal = () => {
    stopping = true;
  };
  const signals: Deno.Signal[] = ["SIGINT", "SIGTERM"];
  for (const s of signals) Deno.addSignalListener(s, onSignal);
  try {
    console.log("Starting the fake API server and kube-nft-proxy in the node namespace...");
    const ready = await eventually(
      "the agent's /healthz to answer 200",
      async () => {
        if (stopping) return "interrupted";
        const st = await Promise.race([agent.status, new Promise((r) => setTimeout(r, 10))]);
        if (st) return "exited";
        const h = await httpGet(`${aut.healthz}/healthz`);
        return h.status === 200 ? "ok" : undefined;
      },
      30_000,
      200,
    );
    if (ready === "interrupted") return 130;
    if (ready === "exited") throw new Error(`the agent exited early\n${agent.tail()}`);
    console.log("Agent healthy (/healthz 200). Sending traffic:\n");

    const checks: Check[] = [];
    for (const p of PROBES) {
      if (stopping) break;
      checks.push(await runProbe(topo, p));
    }
    if (!stopping) checks.push(malformedCheck(agent));
    if (stopping) {
      console.log("Interrupted.");
      return 130;
    }

    console.log("\nProgrammed dispatch (read back through libnftables):");
    for (const line of await dispatchElements()) console.log(`  ${line}`);
    await debugExamples([]);

    const failed = checks.filter((c) => !c.ok).length;
    console.log(
      `\n${checks.length - failed}/${checks.length} checks passed` +
        (failed ? `; ${failed} FAILED (agent log tail below)\n${agent.tail(30)}` : "."),
    );
    return failed ? 1 : 0;
  } catch (err) {
    if (stopping) return 130;
    console.error(`demo failed: ${(err as Error).message}`);
    return 1;
  } finally {
    for (const s of signals) Deno.removeSignalListener(s, onSignal);
    const st = await agent.stop("SIGTERM");
    console.log(`Agent stopped (exit ${st.code}); its rules go away with the namespaces.`);
    await aut.close();
  }
}

/**
 * `kube-nft-proxy trace` and `explain`, run as the agent runs (the start task's permissions):
 * on the live ruleset, or with `extra` = --dry-run flags on the demo cluster file.
 */
async function debugExamples(extra: string[]): Promise<void> {
  const examples = [
    ["trace", "--from", CLIENT4, "--to", "198.19.0.10:80/tcp"],
    ["explain", "default/local"],
  ];
  for (const args of examples) {
    console.log(`\n$ kube-nft-proxy ${args.join(" ")}${extra.length ? " --dry-run ..." : ""}`);
    const r = await AgentProcess.run([...args, ...extra]);
    console.log(r.output.trimEnd());
  }
}

/**
 * How both families dispatch: the frontends of each class chain's set, and the service-ips
 * elements of Services with chains of their own; one line each.
 */
async function dispatchElements(): Promise<string[]> {
  // Imported here: the dry-run path must not need libnftables.
  const { openNftables } = await import("../ffi/nftables/client.ts");
  const out: string[] = [];
  for (const fam of ["ip", "ip6"] as const) {
    const client = openNftables(fam, "kube-proxy");
    try {
      const sets = (await client.listSets()).filter((s) =>
        s.name === "service-ips" || s.name.startsWith("frontends-")
      );
      for (const s of sets) {
        const els = await client.listElements(s.kind, s.name);
        out.push(`${fam} kube-proxy ${s.name} (${els.length} elements):`);
        for (const e of els) {
          const v = e.value === undefined ? "" : ` : ${e.value.join(" ")}`;
          out.push(`  ${e.key.join(" . ")}${v}`);
        }
      }
    } finally {
      client.close();
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

async function main(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    return 0;
  }
  const unknown = args.filter((a) => a !== "--dry-run");
  if (unknown.length) {
    console.error(`demo: unknown argument ${unknown[0]}\n${USAGE}`);
    return 2;
  }
  const inner = Deno.env.get(INNER_ENV);
  if (inner) return await realInside(JSON.parse(inner));
  const why = args.includes("--dry-run") ? "--dry-run was given" : whyNoKernel();
  if (why) {
    console.log(
      `# Real-traffic demo not run: ${why}.\n` +
        "# Showing the nft transactions the agent would apply (kube-nft-proxy --dry-run):\n",
    );
    return await dryRun();
  }
  return await realOutside();
}

if (import.meta.main) Deno.exit(await main(Deno.args));
