/**
 * Conntrack reconcile benchmark: time and memory of one reconcile pass.
 *
 * - `fake`: the pure CPU/memory cost over the in-memory FakeConntrack
 *   (100k and 1M entries, 10% stale, so 1M deletes 100k).
 * - `real`: the FFI client over a real table loaded with `conntrack -R`
 *   (default 200k entries, half stale, so it deletes 100k), in-thread and on
 *   the Worker. nf_conntrack_max is only writable in the initial netns (here
 *   262144), so 1M real entries cannot be loaded in a bench namespace.
 *
 * The `real` part refuses to run in the host's network namespace:
 *
 *   ip netns add b && ip netns exec b ./denow run -A --v8-flags=--expose-gc \
 *     tests/bench/conntrack_reconcile_bench.ts fake real; ip netns del b
 *
 * Prints JSON lines `{bench, n, seconds, rssMB, ...}`; rssMB is the peak RSS
 * growth over the pre-reconcile baseline (the table itself excluded).
 *
 * @module
 */
import { FakeConntrack } from "../../ffi/conntrack/fake.ts";
import type { ConntrackClient, ConntrackEntry } from "../../ffi/conntrack/types.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../../proxier/model.ts";
import { reconcile, type ReconcileResult } from "../../conntrack/reconciler.ts";
import { ReconcileWorker } from "../../conntrack/worker.ts";

/** One measurement. */
export interface ReconcileBenchResult {
  bench: string;
  n: number;
  seconds: number;
  rssMB: number;
  deleted: number;
  deleteSeconds?: number;
  /** Longest main-thread timer gap while the reconcile ran (ms). */
  maxLagMs?: number;
}

const SERVICES = 1000;
const STALE_IP = "198.18.99.99";

function clusterIP(k: number): string {
  const n = k + 10;
  return `198.19.${n >> 8}.${n & 255}`;
}

function endpointIP(k: number, j: number): string {
  const e = 2 * k + j;
  return `198.18.${16 + (e >> 8)}.${e & 255}`;
}

/** 1000 UDP services on port 53 with two endpoints each. */
export function benchState(): ProxyState {
  const services = new Map<string, ServicePortInfo>();
  const endpoints = new Map<string, EndpointInfo[]>();
  for (let k = 0; k < SERVICES; k++) {
    const id = `bench/svc${k}:dns`;
    services.set(id, {
      id,
      namespace: "bench",
      name: `svc${k}`,
      portName: "dns",
      protocol: "UDP",
      family: 4,
      clusterIP: clusterIP(k),
      port: 53,
      nodePort: 0,
      externalIPs: [],
      loadBalancerIPs: [],
      loadBalancerSourceRanges: [],
      stickyMaxAgeSeconds: 0,
      externalPolicyLocal: false,
      internalPolicyLocal: false,
      healthCheckNodePort: 0,
    });
    endpoints.set(
      id,
      [0, 1].map((j) => ({
        ip: endpointIP(k, j),
        port: 53,
        ready: true,
        serving: true,
        terminating: false,
        isLocal: false,
      })),
    );
  }
  return {
    family: 4,
    services,
    endpoints,
    node: { name: "bench", labels: {}, ips: ["198.18.100.1"], podCIDRs: [] },
    serviceCIDRs: ["198.19.0.0/16"],
  };
}

/** The i-th synthetic flow: client 198.18.128.0/18 -> ClusterIP:53, stale when `stale(i)`. */
function flowAt(i: number, stale: (i: number) => boolean) {
  const s = i >> 10;
  const src = `198.18.${128 + (s >> 8)}.${s & 255}`;
  const sport = 1024 + (i & 1023);
  const k = i % SERVICES;
  return {
    src,
    sport,
    dst: clusterIP(k),
    rsrc: stale(i) ? STALE_IP : endpointIP(k, (i >> 1) & 1),
  };
}

const tenth = (i: number) => i % 10 === 0;
const half = (i: number) => i % 2 === 0;

function rssMB(): number {
  return Deno.memoryUsage().rss / 2 ** 20;
}

function collect(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** Wraps a client so dumps sample RSS every 16k entries and deletes are timed. */
function instrument(client: ConntrackClient) {
  const stats = { peak: rssMB(), deleteSeconds: 0 };
  const wrapped: ConntrackClient = {
    dump(family, visit, proto) {
      let n = 0;
      const r = client.dump(family, (e) => {
        visit(e);
        if ((++n & 16383) === 0) stats.peak = Math.max(stats.peak, rssMB());
      }, proto);
      stats.peak = Math.max(stats.peak, rssMB());
      return r;
    },
    delete(entries: readonly ConntrackEntry[]) {
      const t0 = performance.now();
      const r = client.delete(entries);
      stats.deleteSeconds += (performance.now() - t0) / 1000;
      stats.peak = Math.max(stats.peak, rssMB());
      return r;
    },
    close: () => client.close(),
  };
  return { wrapped, stats };
}

function measure(
  bench: string,
  client: ConntrackClient,
  state: ProxyState,
  expectDeleted: number,
): ReconcileBenchResult {
  collect();
  const base = rssMB();
  const { wrapped, stats } = instrument(client);
  stats.peak = base;
  const r: ReconcileResult = reconcile(wrapped, 4, state);
  if (r.deleted !== expectDeleted || r.errors !== 0) {
    throw new Error(
      `${bench}: deleted ${r.deleted} (errors ${r.errors}), expected ${expectDeleted}`,
    );
  }
  return {
    bench,
    n: r.scanned,
    seconds: +r.seconds.toFixed(3),
    rssMB: +(stats.peak - base).toFixed(1),
    deleted: r.deleted,
    deleteSeconds: +stats.deleteSeconds.toFixed(3),
  };
}

/** Reconcile over `n` fake entries, 10% stale. */
export function benchFake(n: number): ReconcileBenchResult {
  const state = benchState();
  const ct = new FakeConntrack();
  for (let i = 0; i < n; i++) {
    const f = flowAt(i, tenth);
    ct.add({ origSrc: f.src, origSport: f.sport, origDst: f.dst, origDport: 53, replySrc: f.rsrc });
  }
  // Warm the JIT on a small table so the figure is steady-state cost.
  reconcile(new FakeConntrack([]), 4, state);
  return measure("reconcile-fake", ct, state, Math.ceil(n / 10));
}

/**
 * Throws unless this process runs in a named network namespace (`ip netns`),
 * i.e. not the host's own. (/proc/1/ns/net is not readable in every sandbox.)
 */
async function assertNotHostNamespace(): Promise<void> {
  const out = await new Deno.Command("ip", {
    args: ["netns", "identify", `${Deno.pid}`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success || new TextDecoder().decode(out.stdout).trim() === "") {
    throw new Error(
      "the real conntrack reconcile bench must run inside a throwaway network namespace " +
        "(ip netns add b; ip netns exec b ...): it loads and deletes real entries",
    );
  }
}

/** Loads flows `0..n-1` (half stale; only those passing `only`) with `conntrack -R`. */
async function loadReal(n: number, only: (i: number) => boolean = () => true): Promise<void> {
  const lines: string[] = [];
  for (let i = 0; i < n; i++) {
    if (!only(i)) continue;
    const f = flowAt(i, half);
    lines.push(
      `-I -p udp -s ${f.src} -d ${f.dst} --sport ${f.sport} --dport 53 --reply-src ${f.rsrc} ` +
        `--reply-dst ${f.src} --reply-port-src 53 --reply-port-dst ${f.sport} -t 600`,
    );
  }
  const file = await Deno.makeTempFile({ prefix: "ct-reconcile-bench-", suffix: ".txt" });
  try {
    await Deno.writeTextFile(file, lines.join("\n") + "\n");
    const out = await new Deno.Command("conntrack", { args: ["-R", file], stderr: "piped" })
      .output();
    if (!out.success) {
      throw new Error(`conntrack -R failed: ${new TextDecoder().decode(out.stderr).trim()}`);
    }
  } finally {
    await Deno.remove(file);
  }
}

/** Reconcile over `n` real entries (half stale), in-thread and then on the Worker. */
export async function benchReal(n: number): Promise<ReconcileBenchResult[]> {
  await assertNotHostNamespace();
  const { openConntrack } = await import("../../ffi/conntrack/client.ts");
  const state = benchState();
  const out: ReconcileBenchResult[] = [];
  await loadReal(n);
  const client = openConntrack();
  try {
    out.push(measure("reconcile-real", client, state, n / 2));
  } finally {
    client.close();
  }
  // Reload the stale half, then the same on the Worker while the main thread keeps a timer.
  await loadReal(n, half);
  const worker = new ReconcileWorker();
  try {
    collect();
    const base = rssMB();
    let maxLag = 0, peak = base, last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxLag = Math.max(maxLag, now - last);
      last = now;
      peak = Math.max(peak, rssMB());
    }, 5);
    const t0 = performance.now();
    const r = await worker.reconcile(4, state);
    clearInterval(timer);
    if (r.deleted !== n / 2) throw new Error(`worker deleted ${r.deleted}, expected ${n / 2}`);
    out.push({
      bench: "reconcile-real-worker",
      n: r.scanned,
      seconds: +((performance.now() - t0) / 1000).toFixed(3),
      rssMB: +(peak - base).toFixed(1), // whole process, sampled every 5 ms
      deleted: r.deleted,
      maxLagMs: +maxLag.toFixed(1),
    });
  } finally {
    worker.close();
  }
  return out;
}

/**
 * Runs the parts asked for (`fake`, `real`), prints one JSON line per
 * measurement and returns them.
 */
export async function benchReconcile(
  parts: readonly string[] = ["fake"],
  opts: { fakeSizes?: number[]; realSize?: number } = {},
): Promise<ReconcileBenchResult[]> {
  const results: ReconcileBenchResult[] = [];
  const emit = (r: ReconcileBenchResult) => {
    results.push(r);
    console.log(JSON.stringify(r));
  };
  if (parts.includes("fake")) {
    for (const n of opts.fakeSizes ?? [100_000, 1_000_000]) emit(benchFake(n));
  }
  if (parts.includes("real")) {
    for (const r of await benchReal(opts.realSize ?? 200_000)) emit(r);
  }
  return results;
}

if (import.meta.main) {
  const parts = Deno.args.filter((a) => !a.startsWith("--"));
  const bad = parts.filter((p) => p !== "fake" && p !== "real");
  const sizeArg = Deno.args.find((a) => a.startsWith("--real-size="));
  const realSize = sizeArg === undefined ? 200_000 : Number(sizeArg.split("=")[1]);
  if (bad.length > 0 || !Number.isInteger(realSize) || realSize < 2 || realSize % 2 !== 0) {
    console.error(
      "usage: conntrack_reconcile_bench.ts [fake] [real] [--real-size=<even n, default 200000>]",
    );
    Deno.exit(2);
  }
  await benchReconcile(parts.length > 0 ? parts : ["fake"], { realSize });
}
