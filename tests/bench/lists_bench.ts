/**
 * The cold start's list phase alone (diagnosis for docs/benchmarks.md, "Cold start: the lists and
 * the trackers"): the fake API server, holding N Services × E endpoints as the end-to-end
 * benchmark's cluster (`tests/support/cluster.ts`), runs in a process of its own; this process
 * lists it with the agent's informers (`startProxyInformers`) into a `ClusterState` until both
 * lists are in and `apply()` has run, as the first sync would. No proxier, no kernel: run it as
 * any user.
 *
 *     deno run -A tests/bench/lists_bench.ts --size=30000x10 [--runs=3] [--v8-flags=...]
 *
 * One JSON line per run, each in a fresh process with the V8 flags of deno.json's `start` task
 * (or `--v8-flags`): time to ready, the main thread's and the process's CPU (from /proc), peak RSS
 * and the JS heap left after two collections.
 *
 * @module
 */
import { ApiFetch } from "../../agent/kube/api_fetch.ts";
import { kubeConfigFromString } from "../../agent/kube/kubeconfig.ts";
import { startProxyInformers } from "../../agent/kube/informers.ts";
import { ClusterState } from "../../proxier/cluster_state.ts";
import type { EndpointSlice, V1Service } from "../../proxier/k8s_types.ts";
import { FakeApiServer } from "../fakeapi/server.ts";
import {
  initialEndpoints,
  node,
  NODE_NAME,
  service,
  serviceCIDR,
  slice,
} from "../support/cluster.ts";

function flag(name: string, dflt: string): string {
  const a = Deno.args.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
}

/** Serves the cluster until killed (the child process). */
function serve(n: number, e: number): void {
  const api = FakeApiServer.start({ serviceCIDRs: true, bookmarkIntervalMs: 5000 });
  api.apply(node());
  api.apply(serviceCIDR());
  for (let i = 0; i < n; i++) {
    api.apply(service(i));
    api.apply(slice(i, initialEndpoints(i, e)));
  }
  console.log(api.url);
}

/** The V8 flags of deno.json's `start` task. */
function startV8Flags(): string {
  const cfg = JSON.parse(Deno.readTextFileSync(new URL("../../deno.json", import.meta.url)));
  return /--v8-flags=(\S+)/.exec(cfg.tasks.start)![1];
}

/** CPU milliseconds of this process, or of its main thread, from /proc. */
function cpuMs(path: string): number {
  const f = Deno.readTextFileSync(path).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** One list phase against `url`. */
async function listOnce(url: string): Promise<Record<string, number>> {
  const kubeconfig = `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n` +
    `    server: ${url}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n` +
    `current-context: c\nusers:\n- name: u\n  user: {}\n`;
  const api = new ApiFetch(kubeConfigFromString(kubeconfig).creds);
  const state = new ClusterState({ nodeName: NODE_NAME, log: () => {} });
  const t0 = performance.now();
  let left = 2;
  let done!: () => void;
  const both = new Promise<void>((r) => (done = r));
  const synced = () => --left === 0 && done();
  const svc = (a: unknown, b: unknown) => state.updateService(a as V1Service, b as V1Service);
  const eps = (a: unknown, b: unknown) =>
    state.updateEndpointSlice(a as EndpointSlice, b as EndpointSlice);
  const informers = startProxyInformers({
    api,
    nodeName: NODE_NAME,
    handlers: {
      services: {
        onAdd: (o) => svc(null, o),
        onUpdate: svc,
        onDelete: (o) => svc(o, null),
        onSynced: synced,
      },
      endpointSlices: {
        onAdd: (o) => eps(null, o),
        onUpdate: eps,
        onDelete: (o) => eps(o, null),
        onSynced: synced,
      },
    },
    timing: { probeIntervalMs: 0 },
  });
  await both;
  state.apply();
  const readyMs = performance.now() - t0;
  const out = {
    readyMs: Math.round(readyMs),
    mainCpuMs: cpuMs(`/proc/self/task/${Deno.pid}/stat`),
    procCpuMs: cpuMs("/proc/self/stat"),
  };
  await informers.stop();
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  const hwm = /VmHWM:\s+(\d+)/.exec(Deno.readTextFileSync("/proc/self/status"))![1];
  return {
    ...out,
    peakMB: Math.round(Number(hwm) / 1024),
    heapMB: Math.round(Deno.memoryUsage().heapUsed / 1e6),
  };
}

if (import.meta.main) {
  const [n, e] = flag("size", "30000x10").split("x").map(Number);
  if (Deno.args.includes("--serve")) serve(n, e);
  else if (Deno.args.includes("--once")) {
    console.log(JSON.stringify(await listOnce(flag("url", ""))));
    Deno.exit(0);
  } else {
    const server = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", import.meta.filename!, "--serve", `--size=${n}x${e}`],
      stdout: "piped",
    }).spawn();
    const reader = server.stdout.pipeThrough(new TextDecoderStream()).getReader();
    const url = (await reader.read()).value!.trim();
    try {
      // Each run in a fresh process: a warm JIT or heap would flatter the second.
      for (let i = 0; i < Number(flag("runs", "1")); i++) {
        const run = await new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "-A",
            `--v8-flags=${flag("v8-flags", startV8Flags())}`,
            import.meta.filename!,
            "--once",
            `--url=${url}`,
          ],
          stderr: "inherit",
        }).output();
        const line = new TextDecoder().decode(run.stdout).trim();
        console.log(JSON.stringify({ size: `${n}x${e}`, ...JSON.parse(line) }));
      }
    } finally {
      server.kill();
      await server.status;
    }
  }
}
