/**
 * The localhost NodePort proxy measured on the real kernel (docs/benchmarks.md, "Localhost
 * NodePorts"): one bulk transfer, small request/response latency and 5,000 concurrent
 * connections, each through 127.0.0.1:<nodePort> (the agent's userspace proxy) against the same
 * pod reached directly. Run with `deno task bench --only=localhost`, or alone as
 * `deno run -A tests/bench/localhost_bench.ts` (root; it makes its own namespaces).
 *
 * Without `--inner` it builds a one-pod topology, starts a stream server in the pod and runs
 * itself with `--inner` in the node namespace, which starts the agent and measures. Prints one
 * JSON line per measurement.
 *
 * @module
 */
import type { KObject } from "../fakeapi/server.ts";
import { denoBin } from "../netns.ts";
import { Topology } from "../topology.ts";
import { startAgent } from "../e2e/fixtures/agent_under_test.ts";
import { eventually } from "../e2e/fixtures/agent_process.ts";
import { attachTopology, node, serviceCIDR } from "../e2e/fixtures/inner_steps.ts";
import {
  dial,
  lhService,
  lhSlice,
  startStream,
  STREAM_PORT,
} from "../e2e/fixtures/localhost_steps.ts";

const NODE_PORT = 30200;
/** The bulk source: a Service of its own on a python3 sender in the pod. */
const BULK_NODE_PORT = 30201, BULK_PORT = 9091;
const BULK_BYTES = Number(Deno.env.get("KNP_LH_BULK_BYTES") ?? 1 << 30);
const RR_COUNT = Number(Deno.env.get("KNP_LH_RR_COUNT") ?? 20_000);
const CONNS = Number(Deno.env.get("KNP_LH_CONNS") ?? 5_000);

function emit(o: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: "localhost", ...o }));
}

/**
 * A bulk source in the pod: python3 writes `bytes` from a 1 MiB buffer to every connection,
 * in C, so neither end's copy loop is what limits the transfer (a Deno sender tops out near
 * the rate the proxy is to be measured at).
 */
const SENDER = `
import socket, sys, threading
n = int(sys.argv[1]); buf = bytes(1 << 20)
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", int(sys.argv[2]))); s.listen(64); print("ready", flush=True)
def serve(c):
    left = n
    while left > 0:
        left -= c.send(memoryview(buf)[:min(left, len(buf))])
    c.close()
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
`;

/** Seconds to receive the sender's bytes, read by `cat` through bash's /dev/tcp. */
async function bulk(host: string, port: number, bytes: number): Promise<number> {
  const script = `exec 3<>/dev/tcp/${host}/${port}; t0=$(date +%s%N); n=$(wc -c <&3); ` +
    `t1=$(date +%s%N); echo "$n $(( (t1 - t0) / 1000 ))"`;
  const out = await new Deno.Command("bash", { args: ["-c", script], stderr: "inherit" }).output();
  const [got, us] = new TextDecoder().decode(out.stdout).trim().split(" ").map(Number);
  if (got !== bytes) throw new Error(`bulk: got ${got} of ${bytes} bytes`);
  return us / 1e6;
}

/** Round-trip times (µs) of `count` 64-byte requests on one connection, after a warm-up. */
async function rr(host: string, port: number, count: number): Promise<number[]> {
  const size = 64;
  const { conn } = await dial(host, port, `rr ${size}`, 10_000);
  const req = new Uint8Array(size);
  const buf = new Uint8Array(size);
  const out: number[] = [];
  for (let i = 0; i < count + 1000; i++) {
    const t0 = performance.now();
    await conn.write(req);
    let have = 0;
    while (have < size) {
      const n = await conn.read(buf.subarray(have));
      if (n === null) throw new Error("rr: closed");
      have += n;
    }
    if (i >= 1000) out.push((performance.now() - t0) * 1000);
  }
  conn.close();
  return out;
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function fds(pid: number): number {
  return [...Deno.readDirSync(`/proc/${pid}/fd`)].length;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** Opens `n` echo connections through the proxy (bounded parallelism), checks each echoes. */
async function concurrent(n: number, pid: number): Promise<Record<string, unknown>> {
  const conns: Deno.TcpConn[] = [];
  let failed = 0;
  let firstError = "";
  const t0 = performance.now();
  for (let i = 0; i < n; i += 250) {
    const batch = await Promise.allSettled(
      Array.from({ length: Math.min(250, n - i) }, () => dial("127.0.0.1", NODE_PORT)),
    );
    for (const r of batch) {
      if (r.status === "fulfilled") conns.push(r.value.conn);
      else {
        failed++;
        firstError ||= String(r.reason);
      }
    }
  }
  const openSeconds = (performance.now() - t0) / 1000;
  // Every connection answers while all are open.
  const one = new Uint8Array([42]);
  const echoes = await Promise.allSettled(conns.map(async (c) => {
    await c.write(one);
    const b = new Uint8Array(1);
    if ((await c.read(b)) !== 1 || b[0] !== 42) throw new Error("no echo");
  }));
  const noEcho = echoes.filter((r) => r.status === "rejected").length;
  const agentFds = fds(pid);
  const agentRss = rssMiB(pid);
  for (const c of conns) c.close();
  return {
    measure: "concurrent",
    connections: n,
    open: conns.length,
    failed,
    noEcho,
    firstError,
    openSeconds: +openSeconds.toFixed(2),
    agentFds,
    agentRssMiB: +agentRss.toFixed(1),
  };
}

/** A Service or slice of localhost_steps with the bulk sender's port instead of the stream port. */
function withPort(o: KObject, what: "spec" | "slice"): KObject {
  if (what === "spec") {
    const spec = o.spec as { ports: { targetPort: number }[] };
    spec.ports[0].targetPort = BULK_PORT;
  } else (o.ports as { port: number }[])[0].port = BULK_PORT;
  return o;
}

/** Bulk throughput to `pod` directly and through the loopback proxy, 3 runs each; emits both. */
async function measureBulk(pod: string): Promise<void> {
  const bulkPaths = [["direct", pod, BULK_PORT], ["proxy", "127.0.0.1", BULK_NODE_PORT]] as const;
  const mbps: Record<string, number> = {};
  for (const [path, host, port] of bulkPaths) {
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await bulk(host, port, BULK_BYTES));
    mbps[path] = BULK_BYTES / median(runs) / 1e6;
    emit({
      measure: "bulk",
      path,
      bytes: BULK_BYTES,
      runsSeconds: runs.map((s) => +s.toFixed(3)),
      MBps: +mbps[path].toFixed(0),
    });
  }
  emit({ measure: "bulk ratio", proxyOverDirect: +(mbps.proxy / mbps.direct).toFixed(2) });
}

/** 64-byte request/response latency, direct and through the proxy; emits both and the difference. */
async function measureLatency(pod: string): Promise<void> {
  const paths = [["direct", pod, STREAM_PORT], ["proxy", "127.0.0.1", NODE_PORT]] as const;
  const lat: Record<string, { p50: number; p99: number }> = {};
  for (const [path, host, port] of paths) {
    const s = (await rr(host, port, RR_COUNT)).sort((a, b) => a - b);
    lat[path] = { p50: pct(s, 0.5), p99: pct(s, 0.99) };
    emit({
      measure: "rr64",
      path,
      count: RR_COUNT,
      p50us: +lat[path].p50.toFixed(1),
      p99us: +lat[path].p99.toFixed(1),
    });
  }
  emit({
    measure: "rr64 added",
    p50us: +(lat.proxy.p50 - lat.direct.p50).toFixed(1),
    p99us: +(lat.proxy.p99 - lat.direct.p99).toFixed(1),
  });
}

async function inner(): Promise<void> {
  const topo = attachTopology("tests/bench/localhost_bench.ts");
  const pod = topo.podIPv4(0);
  const aut = startAgent({
    objects: [
      node(),
      serviceCIDR(),
      lhService("bench", { ip: "198.19.0.20", nodePort: NODE_PORT }),
      lhSlice("bench", [pod]),
      withPort(lhService("bulk", { ip: "198.19.0.21", nodePort: BULK_NODE_PORT }), "spec"),
      withPort(lhSlice("bulk", [pod]), "slice"),
    ],
    args: ["--nodeport-addresses=primary,localhost"],
  });
  try {
    await aut.healthy();
    // Diagnosis: KNP_LH_RENICE=-10 runs the agent ahead of the machine's other work, to tell
    // the proxy's own cost from waiting for a CPU on a shared machine.
    const nice = Deno.env.get("KNP_LH_RENICE");
    if (nice) {
      await new Deno.Command("renice", { args: ["-n", nice, "-p", `${aut.agent.pid}`] }).output();
    }
    emit({
      measure: "setup",
      load: Deno.readTextFileSync("/proc/loadavg").trim(),
      renice: nice ?? "",
    });
    await eventually(
      "the localhost listener",
      async () => {
        try {
          (await dial("127.0.0.1", NODE_PORT)).conn.close();
          return true;
        } catch {
          return undefined;
        }
      },
      20_000,
      100,
    );
    await measureBulk(pod);
    await measureLatency(pod);
    emit({
      measure: "agent idle",
      agentFds: fds(aut.agent.pid),
      agentRssMiB: +rssMiB(aut.agent.pid).toFixed(1),
    });
    emit(await concurrent(CONNS, aut.agent.pid));
    await new Promise((r) => setTimeout(r, 2000));
    emit({
      measure: "after close",
      agentFds: fds(aut.agent.pid),
      tooManyFiles: aut.agent.lines.some((l) => /too many open files|EMFILE/i.test(l.text)),
    });
  } finally {
    await aut.close();
  }
}

async function outer(): Promise<void> {
  const topo = await Topology.create({ pods: 1, tag: "lhb" });
  try {
    const server = await startStream(topo.pods[0], "p");
    const sender = topo.pods[0].spawn(["python3", "-c", SENDER, `${BULK_BYTES}`, `${BULK_PORT}`]);
    const reader = sender.stdout.pipeThrough(new TextDecoderStream()).getReader();
    if (!(await reader.read()).value?.includes("ready")) {
      throw new Error("bulk sender did not start");
    }
    try {
      const child = topo.node.spawn([
        "env",
        `KNP_TOPO=${JSON.stringify(topo.names())}`,
        ...["KNP_LH_BULK_BYTES", "KNP_LH_RR_COUNT", "KNP_LH_CONNS", "KNP_LH_RENICE"].flatMap((k) =>
          Deno.env.get(k) ? [`${k}=${Deno.env.get(k)}`] : []
        ),
        denoBin,
        "run",
        "-A",
        new URL(import.meta.url).pathname,
        "--inner",
      ], { stdout: "inherit", stderr: "inherit" });
      const st = await child.status;
      if (st.code !== 0) throw new Error(`the inner benchmark failed (${st.code})`);
    } finally {
      await server.stop();
      sender.kill("SIGTERM");
      await reader.cancel().catch(() => {});
      await sender.status;
    }
  } finally {
    await topo.close();
  }
}

if (import.meta.main) {
  if (Deno.args.includes("--inner")) await inner();
  else await outer();
}
