/**
 * Sync engine benchmark on the real kernel. Runs INSIDE a network namespace
 * (the bench driver starts it with `ip netns exec`), and refuses to run unless
 * KNP_IN_TEST_NETNS=1, so it can never program the host's tables.
 *
 * For one synthetic cluster size it measures: cold full sync, a no-change
 * full sync, one endpoint change, one new service, one deleted service (each
 * from "change recorded" to "transaction committed"), an endpoint change
 * requested while a full sync is running (through the bounded-frequency
 * runner), and the process RSS. Prints one JSON line per measurement.
 *
 * Usage: deno run -A tests/bench/sync_bench.ts --services 10000 --eps 10 [--chunk 2000] [--stream]
 *
 * @module
 */
import { openNftables } from "../../ffi/nftables/client.ts";
import type { NftablesClient, Transaction } from "../../ffi/nftables/types.ts";
import { parseArgs } from "../../agent/flags.ts";
import { Logger } from "../../agent/log.ts";
import { buildNode, type ProxyNode } from "../../agent/node.ts";
import type { V1Service } from "../../proxier/k8s_types.ts";
import { BoundedFrequencyRunner } from "../../proxier/runner.ts";
import {
  type MutableState,
  noStale,
  serviceId,
  syntheticConfig,
  syntheticEndpoints,
  syntheticService,
  syntheticState,
} from "../support/synthetic.ts";

/** Options of {@link benchSync}. */
export interface SyncBenchOptions {
  services: number;
  eps: number;
  /** Cold-start transaction size in operations (0 = one transaction; default: the proxier's). */
  chunk?: number;
  /** Skip the concurrent full-sync measurement. */
  noConcurrent?: boolean;
}

/** Per-run measurements, as printed. */
export type BenchLine = Record<string, string | number | boolean>;

function emit(line: BenchLine): BenchLine {
  console.log(JSON.stringify(line));
  return line;
}

function rssMB(): number {
  return Math.round(Deno.memoryUsage().rss / 1048576);
}

/** Peak RSS of this process so far (VmHWM), MB. */
function peakMB(): number {
  const m = Deno.readTextFileSync("/proc/self/status").match(/VmHWM:\s+(\d+) kB/);
  return m ? Math.round(Number(m[1]) / 1024) : -1;
}

/** Wraps a client so kernel (libnftables) time is accounted separately. */
function timed(c: NftablesClient): { client: NftablesClient; kernel: () => number } {
  let total = 0;
  const run = c.run.bind(c);
  c.run = async (tx: Transaction) => {
    const t = performance.now();
    try {
      await run(tx);
    } finally {
      total += performance.now() - t;
    }
  };
  return { client: c, kernel: () => total / 1000 };
}

/** Refuses to run outside a test namespace. */
export function requireTestNetns(): void {
  if (Deno.env.get("KNP_IN_TEST_NETNS") !== "1") {
    throw new Error(
      "refusing to program nftables: set KNP_IN_TEST_NETNS=1 and run inside a test network " +
        "namespace (the bench driver tests/bench/main.ts does this)",
    );
  }
}

/**
 * The agent's node over `client`, IPv4 only. The synthetic state is synced
 * through its proxier directly; the node's own state only says when a change
 * waits (production's shouldYield).
 */
async function benchNode(client: NftablesClient, chunk?: number): Promise<ProxyNode> {
  const node = await buildNode(parseArgs(["--hostname-override=bench-node"]), {
    nftables: () => client,
  }, {
    nodeName: "bench-node",
    families: [4],
    log: new Logger({ verbosity: 0, sink: { out: () => {}, err: () => {} } }),
    adopted: false,
    rules: syntheticConfig(),
    proxier: { maxOpsPerTransaction: chunk },
  });
  node.state.apply();
  return node;
}

/** Runs the sync benchmark for one cluster size. */
export async function benchSync(o: SyncBenchOptions): Promise<BenchLine[]> {
  requireTestNetns();
  const out: BenchLine[] = [];
  const size = { services: o.services, eps: o.eps };
  const synth = { services: o.services, endpointsPerService: o.eps };
  const state: MutableState = syntheticState(synth);
  const { client, kernel } = timed(openNftables("ip", "kube-proxy"));
  const node = await benchNode(client, o.chunk);
  const p = node.proxiers[4]!;
  const sync = (changed: string[] = [], deleted: string[] = []) =>
    p.sync({ state, changed: new Set(changed), deleted: new Set(deleted), stale: noStale() });
  let k0 = kernel();
  let t0 = performance.now();
  const cold = await sync();
  out.push(emit({
    bench: "sync-cold",
    ...size,
    chunk: o.chunk ?? "default",
    seconds: (performance.now() - t0) / 1000,
    kernelSeconds: kernel() - k0,
    ops: cold.ops,
    txs: cold.txs,
    rssMB: rssMB(),
    peakRssMB: peakMB(),
  }));

  p.requestFullSync("bench");
  k0 = kernel();
  t0 = performance.now();
  const again = await sync();
  out.push(emit({
    bench: "sync-full-nochange",
    ...size,
    seconds: (performance.now() - t0) / 1000,
    kernelSeconds: kernel() - k0,
    ops: again.ops,
    rssMB: rssMB(),
  }));

  // One endpoint change: a new endpoint replaces one of service k's.
  const k = Math.floor(o.services / 2);
  t0 = performance.now();
  state.endpoints.set(serviceId(k), syntheticEndpoints(k, synth, 1_000_003));
  const ep = await sync([serviceId(k)]);
  out.push(emit({
    bench: "sync-endpoint-change",
    ...size,
    seconds: (performance.now() - t0) / 1000,
    ops: ep.ops,
  }));

  // One new service.
  t0 = performance.now();
  const svc = syntheticService(o.services, synth);
  state.services.set(svc.id, svc);
  state.endpoints.set(svc.id, syntheticEndpoints(o.services, synth));
  const add = await sync([svc.id]);
  out.push(emit({
    bench: "sync-new-service",
    ...size,
    seconds: (performance.now() - t0) / 1000,
    ops: add.ops,
  }));

  // One deleted service.
  t0 = performance.now();
  state.services.delete(svc.id);
  state.endpoints.delete(svc.id);
  const del = await sync([], [svc.id]);
  out.push(emit({
    bench: "sync-delete-service",
    ...size,
    seconds: (performance.now() - t0) / 1000,
    ops: del.ops,
  }));

  if (!o.noConcurrent) out.push(emit(await concurrent(node, state, synth, size)));
  await node.close();
  return out;
}

/** A Service recorded into the node's state to say "a change is waiting" (production's shouldYield). */
const WAITING: V1Service = {
  metadata: { namespace: "bench", name: "waiting", resourceVersion: "1" },
  spec: { clusterIP: "198.18.255.254", ports: [{ name: "p", protocol: "TCP", port: 80 }] },
};

/**
 * Starts a no-change full sync through the runner (minInterval 1 s), records
 * an endpoint change 10 ms later, and measures when that change commits.
 */
async function concurrent(
  node: ProxyNode,
  state: MutableState,
  synth: { services: number; endpointsPerService: number },
  size: { services: number; eps: number },
): Promise<BenchLine> {
  const p = node.proxiers[4]!;
  const minInterval = 1000;
  let dirty = new Set<string>();
  let recordedAt = 0;
  let committedAt = 0;
  let fullSeconds = 0;
  let preempted = 0;
  let done: () => void = () => {};
  const finished = new Promise<void>((res) => done = res);
  const runner = new BoundedFrequencyRunner(async () => {
    const changed = dirty;
    dirty = new Set();
    // Taking the change consumes what the node's state had waiting.
    if (changed.size > 0) node.state.apply();
    const r = await p.sync({ state, changed, deleted: new Set(), stale: noStale() });
    if (r?.full && recordedAt > 0) fullSeconds = r.seconds;
    if (r?.preempted) preempted++;
    if (r?.followUpMs !== undefined) runner.runAfter(r.followUpMs);
    if (recordedAt > 0 && changed.size > 0) committedAt = performance.now();
    if (committedAt > 0 && fullSeconds > 0) done();
  }, { minInterval, maxInterval: 3_600_000, burst: 2 });
  p.requestFullSync("bench-concurrent");
  runner.start();
  await new Promise((r) => setTimeout(r, 10));
  const k = 7 % synth.services;
  recordedAt = performance.now();
  state.endpoints.set(serviceId(k), syntheticEndpoints(k, synth, 2_000_003));
  dirty.add(serviceId(k));
  node.state.updateService(null, WAITING);
  runner.run();
  await finished;
  await runner.stop();
  return {
    bench: "sync-endpoint-during-full",
    ...size,
    fullSeconds,
    preempted,
    latencySeconds: (committedAt - recordedAt) / 1000,
    minIntervalSeconds: minInterval / 1000,
  };
}

function arg(name: string, def?: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  if (i < 0) {
    if (def === undefined) throw new Error(`missing --${name} N`);
    return def;
  }
  const v = Number(Deno.args[i + 1]);
  if (!Number.isInteger(v) || v < 0) throw new Error(`--${name} needs a non-negative integer`);
  return v;
}

if (import.meta.main) {
  await benchSync({
    services: arg("services"),
    eps: arg("eps", 10),
    chunk: Deno.args.includes("--chunk") ? arg("chunk") : undefined,
    noConcurrent: Deno.args.includes("--no-concurrent"),
  });
}
