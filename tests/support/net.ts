/**
 * The benchmark's network, built from inside the node namespace the bench driver runs us in:
 *
 *   client 198.18.3.2 --eth0--kc0-- node (this namespace, where the agent runs) --kb0--eth0-- backend
 *                                   lo 198.18.0.1, forwarding on            198.18.4.2, and every
 *                                   198.18.128.0/17 via the backend         198.18.128.0/17 address
 *                                                                           (a `local` route: AnyIP)
 *
 * The node has no route for the ServiceCIDR: until the agent's rules translate a ClusterIP, a
 * probe is refused at once (ICMP unreachable) instead of hanging. Only 198.18.0.0/15 is used.
 *
 * Shared test support: tests/bench/agent and e2e drivers (crash_sync, crash_conntrack) use it.
 *
 * @module
 */
import { denoBin, Netns, run } from "../netns.ts";
import { ENDPOINT_PREFIX, TARGET_PORT } from "./cluster.ts";
import { lines } from "./lines.ts";
import { now } from "./prober.ts";

const here = new URL(".", import.meta.url).pathname;

/** Runs `ip` in this (the node's) namespace. */
function ip(...args: string[]): Promise<unknown> {
  return run(["ip", ...args]);
}

/** A prober process in the client namespace, driven by JSON-line commands. */
export class Prober {
  #next = 1;
  readonly #waiting = new Map<number, (r: Record<string, unknown>) => void>();
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #ready: Promise<void>;

  constructor(readonly child: Deno.ChildProcess) {
    this.#writer = child.stdin.getWriter();
    let ready!: () => void;
    this.#ready = new Promise((r) => ready = r);
    (async () => {
      for await (const line of lines(child.stdout)) {
        const msg = JSON.parse(line);
        if (msg.ready) ready();
        const w = this.#waiting.get(msg.id);
        this.#waiting.delete(msg.id);
        w?.(msg);
      }
    })();
  }

  /** Sends one command; resolves with its answer (rejects on an `error` answer). */
  async send(cmd: Record<string, unknown>): Promise<Record<string, unknown>> {
    await this.#ready;
    const id = this.#next++;
    const answer = new Promise<Record<string, unknown>>((r) => this.#waiting.set(id, r));
    await this.#writer.write(new TextEncoder().encode(JSON.stringify({ ...cmd, id }) + "\n"));
    const r = await answer;
    if (typeof r.error === "string") throw new Error(`prober: ${r.error}`);
    return r;
  }

  /** Time until `target` is answered by `reply`, measured from `t0` (ms). */
  async latency(target: string, reply: string, t0: number, timeoutMs = 30_000): Promise<number> {
    const r = await this.send({ op: "expect", target, reply, timeoutMs });
    return (r.t as number) - t0;
  }

  async close(): Promise<void> {
    await this.#writer.close().catch(() => {});
    try {
      this.child.kill("SIGKILL");
    } catch { /* gone */ }
    await this.child.status;
  }
}

/** The client and backend namespaces around this node namespace. */
export class BenchNet {
  private constructor(
    readonly client: Netns,
    readonly backend: Netns,
    readonly echo: Deno.ChildProcess,
    readonly prober: Prober,
  ) {}

  /** Builds both namespaces, starts the backend echo and the prober. */
  static async create(): Promise<BenchNet> {
    if (Deno.env.get("KNP_IN_TEST_NETNS") !== "1") {
      throw new Error("the benchmark network is built only inside a test namespace");
    }
    const client = await Netns.create("cli");
    const backend = await Netns.create("be");
    try {
      await ip("link", "set", "lo", "up");
      await ip("addr", "add", "198.18.0.1/32", "dev", "lo");
      await run(["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
      // Before the rules exist, each of the prober's SYNs (hundreds a second, all from one
      // client) draws an ICMP unreachable; by default the kernel sends that host about one a
      // second. Unthrottled (this namespace only), none hangs until the prober gives it up.
      await run(["sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"]);
      await run(["sysctl", "-qw", "net.ipv4.icmp_msgs_per_sec=1000000"]);
      await run(["sysctl", "-qw", "net.ipv4.icmp_msgs_burst=1000000"]);
      for (const [ns, ifName, net] of [[client, "kc0", "3"], [backend, "kb0", "4"]] as const) {
        await ip("link", "add", ifName, "type", "veth", "peer", "name", "eth0", "netns", ns.name);
        await ip("addr", "add", `198.18.${net}.1/24`, "dev", ifName);
        await ip("link", "set", ifName, "up");
        await ns.exec(["ip", "addr", "add", `198.18.${net}.2/24`, "dev", "eth0"]);
        await ns.exec(["ip", "link", "set", "eth0", "up"]);
        await ns.exec(["ip", "route", "add", "default", "via", `198.18.${net}.1`]);
      }
      await ip("route", "add", ENDPOINT_PREFIX, "via", "198.18.4.2");
      await backend.exec(["ip", "route", "add", "local", ENDPOINT_PREFIX, "dev", "lo"]);

      const echo = backend.spawn([denoBin, "run", "-A", `${here}anyip_echo.ts`, `${TARGET_PORT}`]);
      await firstLine(echo.stdout, "ready");
      const proberChild = new Deno.Command("ip", {
        args: ["netns", "exec", client.name, denoBin, "run", "-A", `${here}prober.ts`],
        stdin: "piped",
        stdout: "piped",
        stderr: "inherit",
      }).spawn();
      return new BenchNet(client, backend, echo, new Prober(proberChild));
    } catch (e) {
      await client.delete();
      await backend.delete();
      throw e;
    }
  }

  /** Stops the helpers and deletes both namespaces. */
  async close(): Promise<void> {
    await this.prober.close();
    try {
      this.echo.kill("SIGKILL");
    } catch { /* gone */ }
    await this.echo.status;
    await this.client.delete();
    await this.backend.delete();
  }
}

async function firstLine(stream: ReadableStream<Uint8Array>, want: string): Promise<void> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  const deadline = now() + 30_000;
  while (!buf.includes(want)) {
    if (now() > deadline) throw new Error(`no "${want}" from a helper`);
    const { value, done } = await reader.read();
    if (done) throw new Error(`a helper exited before "${want}"`);
    buf += value;
  }
  reader.releaseLock();
}

/** Memory and CPU of a process and all its descendants, from /proc. */
export interface TreeStat {
  rssMB: number;
  hwmMB: number;
  cpuSeconds: number;
  /** Page faults so far, minor and major. */
  faults: number;
}

function descendants(pid: number): number[] {
  const out = [pid];
  try {
    for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
      const kids = Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/children`).trim();
      for (const k of kids ? kids.split(/\s+/) : []) out.push(...descendants(Number(k)));
    }
  } catch { /* exited */ }
  return out;
}

const TICK = 100; // USER_HZ on Linux

/** RSS, peak RSS (VmHWM), CPU time and page faults summed over `pid`'s process tree. */
export function treeStat(pid: number): TreeStat {
  let rss = 0, hwm = 0, cpu = 0, faults = 0;
  for (const p of descendants(pid)) {
    try {
      const st = Deno.readTextFileSync(`/proc/${p}/status`);
      rss += Number(st.match(/VmRSS:\s+(\d+)/)?.[1] ?? 0);
      hwm += Number(st.match(/VmHWM:\s+(\d+)/)?.[1] ?? 0);
      const stat = Deno.readTextFileSync(`/proc/${p}/stat`);
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      cpu += (Number(f[11]) + Number(f[12])) / TICK; // utime, stime
      faults += Number(f[7]) + Number(f[9]); // minflt, majflt
    } catch { /* exited */ }
  }
  const mb = (kb: number) => Math.round(kb / 1024);
  return { rssMB: mb(rss), hwmMB: mb(hwm), cpuSeconds: cpu, faults };
}
