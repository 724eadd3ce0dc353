/**
 * A small node-with-pods network for real-traffic tests and the demo, built from throwaway
 * network namespaces (see `tests/netns.ts`):
 *
 *   client 198.18.3.2/24, 2001:db8:3::2/64 --eth0-- node (router)
 *          default via 198.18.3.1 / 2001:db8:3::1       eth0 198.18.3.1/24, 2001:db8:3::1/64
 *                                                      lo 198.18.0.1/32, 2001:db8::1/128
 *                                                      default via the client
 *                                       pod i <--vp<i>--'  (pod i: 198.18.1.(2+i)/32,
 *                                                           2001:db8:1::(2+i)/128)
 *
 * - `node` is the Kubernetes node: forwarding is on (set inside the node namespace only), its
 *   primary IPs 198.18.0.1 / 2001:db8::1 live on its loopback (so `fib daddr type local`
 *   matches them, as for NodePorts) and also on every pod-facing veth, so a pod reaches its
 *   gateway on-link and traffic the node masquerades towards a pod leaves with the node's IP.
 *   Like a real node it has a default route (towards the client), so a packet to an address the
 *   rules do not translate is forwarded and meets the filter rules instead of failing routing.
 * - `client` is an off-node host routed through the node.
 * - `pods[i]` run workloads; {@link Topology.startEcho} starts an echo server in one.
 *
 * API (stable; other tests and `demo/main.ts` use it):
 * - `await Topology.create({ pods: 2 })`, then `topo.node`, `topo.client`, `topo.pods[i]`,
 *   `topo.podIPv4(i)`, `topo.podIPv6(i)`, and the address constants exported below;
 * - `await topo.startEcho(podIndexOrNs, label, tcpPort, udpPort)` -> {@link EchoServer};
 *   it answers "<label> <peer address>" (TCP on IPv4 and IPv6, UDP on IPv4);
 * - `await topo.request(fromNs, "tcp" | "udp", host, port, count, timeoutMs?)` ->
 *   {@link ProbeResult}[] (one fresh connection or socket per attempt);
 * - `await topo.close()` stops the echo servers and deletes every namespace (idempotent; throws
 *   naming any namespace it could not delete);
 * - a child process (e.g. one running inside the node namespace) gets the same handles from
 *   `Topology.attach(topo.names())`; an attached topology never deletes the namespaces;
 * - `assertInNetns(name)` guards code that programs the kernel: it throws unless the process
 *   runs inside that namespace; `replies(results)` turns probe results into [label, peer].
 *
 * Only 198.18.0.0/15 and 2001:db8::/32 are used. Needs root and iproute2.
 * @module
 */
import { denoBin, link, Netns, repoRoot, run } from "./netns.ts";

/** The node's primary IPv4 address (on its loopback and its pod veths). */
export const NODE4 = "198.18.0.1";
/** The node's primary IPv6 address. */
export const NODE6 = "2001:db8::1";
/** The node's address on the client link (the client's IPv4 gateway). */
export const NODE_LINK4 = "198.18.3.1";
/** The node's IPv6 address on the client link (the client's IPv6 gateway). */
export const NODE_LINK6 = "2001:db8:3::1";
/** The off-node client's IPv4 address. */
export const CLIENT4 = "198.18.3.2";
/** The off-node client's IPv6 address. */
export const CLIENT6 = "2001:db8:3::2";
/** Pod CIDRs (what the Node object's podCIDRs would say). */
export const POD_CIDRS = ["198.18.1.0/24", "2001:db8:1::/64"];

/** A namespace handle: a {@link Netns}, or one known only by name ({@link nsByName}). */
export type NsHandle = Pick<Netns, "name" | "exec" | "spawn" | "delete">;

/** Namespace names of a topology, to hand to a child process (e.g. as JSON in an env var). */
export interface TopologyNames {
  node: string;
  client: string;
  pods: string[];
}

/** A handle on an existing namespace made by someone else; `delete()` does nothing. */
export function nsByName(name: string): NsHandle {
  if (!/^[\w.-]+$/.test(name)) throw new Error(`not a network namespace name: "${name}"`);
  return {
    name,
    exec: (cmd, opts = {}) => run(["ip", "netns", "exec", name, ...cmd], opts),
    spawn: (cmd, opts = {}) =>
      new Deno.Command("ip", {
        args: ["netns", "exec", name, ...cmd],
        stdin: "null",
        stdout: opts.stdout ?? "piped",
        stderr: opts.stderr ?? "piped",
      }).spawn(),
    delete: () => Promise.resolve(),
  };
}

/**
 * Throws unless this process runs inside network namespace `name`: a guard for code that
 * touches nftables or conntrack, so it can never act on the host's own namespace.
 */
export function assertInNetns(name: string): void {
  let want: Deno.FileInfo;
  try {
    want = Deno.statSync(`/run/netns/${name}`);
  } catch {
    throw new Error(`network namespace "${name}" does not exist (no /run/netns/${name})`);
  }
  const have = Deno.statSync("/proc/self/ns/net");
  if (want.ino !== have.ino || want.dev !== have.dev) {
    throw new Error(
      `refusing to run: this process is not inside network namespace "${name}" ` +
        `(start it with: ip netns exec ${name} ...)`,
    );
  }
}

/** Options of {@link Topology.create}. */
export interface TopologyOptions {
  /** Number of pod namespaces (0..200); default 2. */
  pods?: number;
  /** Short tag put into namespace names (letters and digits); default "topo". */
  tag?: string;
}

/** One answer of {@link Topology.request}: a reply line, or an error name and how long it took. */
export type ProbeResult = { reply: string } | { error: string; ms: number };

/** A running echo server in a pod. */
export interface EchoServer {
  /** The label it answers with. */
  readonly label: string;
  /** Stops it (idempotent). */
  stop(): Promise<void>;
}

const FIX = `${repoRoot}/tests/e2e/fixtures`;

/** Names of existing namespaces starting with `prefix`. */
async function ourNamespaces(prefix: string): Promise<string[]> {
  const r = await run(["ip", "netns", "list"], { check: false });
  return r.stdout.split("\n").map((l) => l.split(" ")[0]).filter((n) => n.startsWith(prefix));
}

/** Deletes a namespace, retrying briefly; true once it is gone. */
async function deleteNamespace(name: string): Promise<boolean> {
  for (let attempt = 0; attempt < 5; attempt++) {
    await run(["ip", "netns", "delete", name], { check: false });
    try {
      Deno.statSync(`/run/netns/${name}`);
    } catch {
      return true;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** Reads the first line a child prints on stdout, then lets the rest drain. */
async function firstLine(p: Deno.ChildProcess, timeoutMs: number): Promise<string> {
  const reader = p.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no output within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    while (!buf.includes("\n")) {
      const { value, done } = await Promise.race([reader.read(), timeout]);
      if (done) break;
      buf += value;
    }
  } finally {
    clearTimeout(timer);
  }
  // Keep reading so the child never blocks on a full pipe.
  (async () => {
    try {
      while (!(await reader.read()).done) { /* discard */ }
    } catch { /* child gone */ }
  })();
  return buf.split("\n")[0].trim();
}

/** The node, an off-node client and pods, wired as described in the module doc. */
export class Topology {
  readonly #echoes: EchoServer[] = [];
  #closed = false;

  private constructor(
    /** The node (router; where kube-nft-proxy runs). */
    readonly node: NsHandle,
    /** The off-node client. */
    readonly client: NsHandle,
    /** The pods, index i having {@link podIPv4}(i) / {@link podIPv6}(i). */
    readonly pods: readonly NsHandle[],
    /** False for an attached topology: close() then leaves the namespaces alone. */
    readonly owner: boolean,
  ) {}

  /** Handles on a topology another process created (see {@link names}); never deletes them. */
  static attach(names: TopologyNames): Topology {
    if (!names || typeof names.node !== "string" || typeof names.client !== "string") {
      throw new Error(
        `Topology.attach: expected {node, client, pods}, got ${JSON.stringify(names)}`,
      );
    }
    return new Topology(
      nsByName(names.node),
      nsByName(names.client),
      (names.pods ?? []).map(nsByName),
      false,
    );
  }

  /** The namespace names, for {@link attach} in a child process. */
  names(): TopologyNames {
    return { node: this.node.name, client: this.client.name, pods: this.pods.map((p) => p.name) };
  }

  /** Pod i's IPv4 address, 198.18.1.(2+i). */
  static podIPv4(i: number): string {
    return `198.18.1.${2 + i}`;
  }

  /** Pod i's IPv6 address, 2001:db8:1::(2+i) (hex). */
  static podIPv6(i: number): string {
    return `2001:db8:1::${(2 + i).toString(16)}`;
  }

  /** Pod i's IPv4 address. */
  podIPv4(i: number): string {
    return Topology.podIPv4(i);
  }

  /** Pod i's IPv6 address. */
  podIPv6(i: number): string {
    return Topology.podIPv6(i);
  }

  /** Builds the namespaces and links; on failure deletes whatever it made. */
  static async create(opts: TopologyOptions = {}): Promise<Topology> {
    const n = opts.pods ?? 2;
    if (!Number.isInteger(n) || n < 0 || n > 200) {
      throw new RangeError(`Topology: pods must be an integer in 0..200, got ${n}`);
    }
    const tag = opts.tag ?? "topo";
    if (!/^[a-z0-9]{1,6}$/i.test(tag)) {
      throw new RangeError(`Topology: tag must be 1-6 letters or digits, got "${tag}"`);
    }
    const prefix = `knp${Deno.pid}-${tag}`;
    const before = new Set(await ourNamespaces(prefix));
    const made: Netns[] = [];
    try {
      const node = await Netns.create(`${tag}n`);
      made.push(node);
      const client = await Netns.create(`${tag}c`);
      made.push(client);
      const pods: Netns[] = [];
      for (let i = 0; i < n; i++) {
        const pod = await Netns.create(`${tag}p`);
        made.push(pod);
        pods.push(pod);
      }
      const topo = new Topology(node, client, pods, true);
      await topo.#wire();
      return topo;
    } catch (err) {
      for (const ns of made) await ns.delete();
      // A namespace whose creation was cut short (e.g. Ctrl-C) is not in `made`.
      for (const name of await ourNamespaces(prefix)) {
        if (!before.has(name)) await deleteNamespace(name);
      }
      throw err;
    }
  }

  async #wire(): Promise<void> {
    const { node, client } = this;
    // No dummy interface here (the module may be missing): lo holds the primary IPs.
    await node.exec(["ip", "addr", "add", `${NODE4}/32`, "dev", "lo"]);
    await node.exec(["ip", "-6", "addr", "add", `${NODE6}/128`, "dev", "lo", "nodad"]);

    await link(node, "eth0", client, "eth0");
    await node.exec(["ip", "addr", "add", `${NODE_LINK4}/24`, "dev", "eth0"]);
    await node.exec(["ip", "-6", "addr", "add", `${NODE_LINK6}/64`, "dev", "eth0", "nodad"]);
    await client.exec(["ip", "addr", "add", `${CLIENT4}/24`, "dev", "eth0"]);
    await client.exec(["ip", "-6", "addr", "add", `${CLIENT6}/64`, "dev", "eth0", "nodad"]);
    await client.exec(["ip", "route", "add", "default", "via", NODE_LINK4]);
    await client.exec(["ip", "-6", "route", "add", "default", "via", NODE_LINK6]);

    for (let i = 0; i < this.pods.length; i++) {
      const pod = this.pods[i], dev = `vp${i}`;
      const p4 = this.podIPv4(i), p6 = this.podIPv6(i);
      await link(node, dev, pod, "eth0");
      await node.exec(["ip", "addr", "add", `${NODE4}/32`, "dev", dev]);
      await node.exec(["ip", "-6", "addr", "add", `${NODE6}/128`, "dev", dev, "nodad"]);
      await node.exec(["ip", "route", "add", `${p4}/32`, "dev", dev]);
      await node.exec(["ip", "-6", "route", "add", `${p6}/128`, "dev", dev]);
      await pod.exec(["ip", "addr", "add", `${p4}/32`, "dev", "eth0"]);
      await pod.exec(["ip", "-6", "addr", "add", `${p6}/128`, "dev", "eth0", "nodad"]);
      await pod.exec(["ip", "route", "add", NODE4, "dev", "eth0"]);
      await pod.exec(["ip", "route", "add", "default", "via", NODE4, "dev", "eth0"]);
      await pod.exec(["ip", "-6", "route", "add", NODE6, "dev", "eth0"]);
      await pod.exec(["ip", "-6", "route", "add", "default", "via", NODE6, "dev", "eth0"]);
    }

    await node.exec(["ip", "route", "add", "default", "via", CLIENT4]);
    await node.exec(["ip", "-6", "route", "add", "default", "via", CLIENT6]);
    // Inside the node namespace only: routing on, and no ICMP rate limit (each reject sends one).
    await node.exec(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
    await node.exec(["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
    await node.exec(["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"]);
    await node.exec(["sysctl", "-q", "-w", "net.ipv6.icmp.ratelimit=0"]);
  }

  /**
   * Starts an echo server in a pod (by index or namespace) answering "<label> <peer>" on TCP
   * `tcpPort` (IPv4 and, for an indexed pod, its IPv6 address) and UDP `udpPort` (IPv4).
   * Resolves once it listens.
   */
  async startEcho(
    pod: number | NsHandle,
    label: string,
    tcpPort: number,
    udpPort: number,
  ): Promise<EchoServer> {
    if (this.#closed) throw new Error("Topology: startEcho after close()");
    const idx = typeof pod === "number" ? pod : this.pods.indexOf(pod);
    const ns = typeof pod === "number" ? this.pods[pod] : pod;
    if (!ns) throw new RangeError(`Topology: no pod ${pod} (have ${this.pods.length})`);
    if (!/^\S+$/.test(label)) throw new Error(`Topology: echo label must be one word: "${label}"`);
    const args = [denoBin, "run", "-A", `${FIX}/dataplane_echo.ts`, label, String(tcpPort)];
    args.push(String(udpPort));
    if (idx >= 0) args.push(this.podIPv6(idx));
    const child = ns.spawn(args, { stderr: "inherit" });
    let stopped = false;
    const server: EchoServer = {
      label,
      stop: async () => {
        if (stopped) return;
        stopped = true;
        try {
          child.kill("SIGTERM");
        } catch { /* already exited */ }
        await child.status;
      },
    };
    this.#echoes.push(server);
    const line = await firstLine(child, 15_000).catch(async (err) => {
      await server.stop();
      throw new Error(`echo server ${label} did not start: ${(err as Error).message}`);
    });
    if (line !== "ready") {
      await server.stop();
      throw new Error(`echo server ${label} did not start: printed "${line}"`);
    }
    return server;
  }

  /** {@link request}, as a method for the drivers that hold a topology. */
  request(...args: Parameters<typeof request>): Promise<ProbeResult[]> {
    return request(...args);
  }

  /** Stops the echo servers and, when it made them, deletes every namespace (idempotent). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const e of this.#echoes) await e.stop();
    if (!this.owner) return;
    const left: string[] = [];
    for (const ns of [this.node, this.client, ...this.pods]) {
      if (!(await deleteNamespace(ns.name))) left.push(ns.name);
    }
    if (left.length) {
      throw new Error(
        `Topology: could not delete namespaces ${left.join(", ")}; ` +
          `remove them with: ip netns delete <name>`,
      );
    }
  }
}

/**
 * Makes `count` separate TCP connections (or UDP exchanges from fresh sockets) from `from` to
 * host:port and returns what each got. `timeoutMs` bounds each attempt (default 3000).
 */
export async function request(
  from: NsHandle,
  proto: "tcp" | "udp",
  host: string,
  port: number,
  count: number,
  timeoutMs = 3000,
): Promise<ProbeResult[]> {
  const r = await from.exec([
    denoBin,
    "run",
    "-A",
    `${FIX}/dataplane_client.ts`,
    proto,
    host,
    String(port),
    String(count),
    String(timeoutMs),
  ], { check: false });
  if (r.code !== 0) {
    throw new Error(`request ${proto} ${host}:${port} failed (exit ${r.code}): ${r.stderr}`);
  }
  return JSON.parse(r.stdout) as ProbeResult[];
}

/** Splits successful probe replies into [label, peer address] pairs; throws on any error. */
export function replies(rs: ProbeResult[]): [string, string][] {
  return rs.map((r) => {
    if (!("reply" in r)) throw new Error(`expected only replies, got ${JSON.stringify(rs)}`);
    const [label, peer] = r.reply.split(" ");
    return [label, peer];
  });
}
