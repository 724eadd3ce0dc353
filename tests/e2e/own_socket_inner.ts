/**
 * Our own nftables sockets at high descriptors, inner half: runs INSIDE the node namespace of a
 * {@link Topology} built by tests/e2e/own_socket_test.ts (env KNP_TOPO; pods 0 and 1 run echo
 * servers "a" and "b", and here stream servers too).
 *
 * The agent tells its own nftables batches from other programs' by the sending socket's port id,
 * and finds its sockets (libnftables never shows its own) by probing its descriptors. Here the
 * agent's localhost NodePort proxy holds 2600 relayed connections (5200 descriptors) before the
 * agent's first element-only write opens the raw writer's socket, which so sits past fd 5000 (the
 * probe used to stop at 4096). Its own syncs must still be recognised (no check, no repair),
 * while a foreign `nft` (another process, through libnftables) changing our table is still
 * repaired within 2 s, a burst of them too. --sync-period is an hour: only the notifications can
 * explain a repair. (libnftables' own socket cannot be tested that high: libnftables 1.0.x waits
 * on it with select(2) and aborts the process past fd 1023.) Then, in this process: a batch of
 * ours from a socket no scan finds is told ours by its NEWGEN thread (one warning), while an
 * `nft` process's stays foreign; and a context whose socket would land past fd 1023 is refused
 * with an error, not an abort.
 * Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { libc } from "../../ffi/libc.ts";
import { openNftables } from "../../ffi/nftables/client.ts";
import { NftContext } from "../../ffi/nftables/libnftables.ts";
import { NftablesMonitor, OwnSockets } from "../../ffi/nftables/netlink/monitor.ts";
import type { NftNotification } from "../../ffi/nftables/netlink/notify.ts";
import { run } from "../netns.ts";
import { AgentProcess, eventually } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import { assertAlive, repairCount, repairedAfter } from "./fixtures/repair_steps.ts";
import {
  attachTopology,
  nft,
  node,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";
import { dial, lhService, lhSlice, startStream } from "./fixtures/localhost_steps.ts";

const topo = attachTopology("tests/e2e/own_socket_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.10", DNS = "198.19.0.53", WEB6 = "2001:db8:ffff::10";
/** Connections the localhost proxy holds (two descriptors each) before our first raw write. */
const HELD = 2600;
const LH_PORT = 30100;
const NETLINK_NETFILTER = 12;

/** The agent under test as {@link startAgent} returns it. */
type Aut = ReturnType<typeof startAgent>;

interface Ctx {
  aut: Aut;
  agent: AgentProcess;
  /** Connections held through the agent's localhost proxy. */
  held: Deno.TcpConn[];
}

/** The agent: this process's child running main.ts (`deno run`, spawned directly). */
function agentPid(): number {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const st = Deno.readTextFileSync(`/proc/${e.name}/status`);
      if (/^PPid:\s+(\d+)$/m.exec(st)?.[1] !== String(Deno.pid)) continue;
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`);
      if (cmd.includes("main.ts\0")) return Number(e.name);
    } catch { /* gone */ }
  }
  throw new Error("the agent process was not found");
}

/** The agent's NETLINK_NETFILTER sockets in this namespace: descriptor and port id. */
function agentNetfilterSockets(pid: number): { fd: number; portid: number }[] {
  // /proc/net/netlink lists this namespace's netlink sockets: protocol, port id, inode.
  const byInode = new Map<string, number>();
  for (const line of Deno.readTextFileSync("/proc/net/netlink").split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 10 && Number(f[1]) === NETLINK_NETFILTER) byInode.set(f[9], Number(f[2]));
  }
  const out: { fd: number; portid: number }[] = [];
  for (const e of Deno.readDirSync(`/proc/${pid}/fd`)) {
    let link: string;
    try {
      link = Deno.readLinkSync(`/proc/${pid}/fd/${e.name}`);
    } catch {
      continue;
    }
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
    const portid = inode === undefined ? undefined : byInode.get(inode);
    if (portid !== undefined) out.push({ fd: Number(e.name), portid });
  }
  return out.sort((a, b) => a.fd - b.fd);
}

/** Lines since `from` that say a sync checked or repaired, failed, or took ours for foreign. */
function suspicious(agent: AgentProcess, from: number): string[] {
  return agent.lines.slice(from).map((l) => l.text).filter((l) =>
    /Sync failed|restored|checking what it touched|counts as ours/.test(l)
  );
}

async function coldStart(c: Ctx): Promise<void> {
  await c.aut.healthy();
  await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
  await reaches(topo, "udp", DNS, 53, ["a", "b"]);
  const d = await dial("127.0.0.1", LH_PORT);
  d.conn.close();
}

/** HELD connections through the localhost proxy, kept open: the agent's fd table grows. */
async function holdConnections(c: Ctx): Promise<void> {
  for (let i = 0; i < HELD; i += 100) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(100, HELD - i) }, () => dial("127.0.0.1", LH_PORT)),
    );
    for (const d of batch) c.held.push(d.conn);
  }
  const pid = agentPid();
  const open = [...Deno.readDirSync(`/proc/${pid}/fd`)].length;
  console.log(`agent: ${open} descriptors open`);
  assert.ok(open > 2 * HELD, `${open} descriptors`);
}

/** The premise: a socket the agent opened since sits past fd 4096, and it is bound. */
function socketsAreHigh(): void {
  const socks = agentNetfilterSockets(agentPid());
  console.log(`agent's netfilter sockets: ${JSON.stringify(socks)}`);
  assert.ok(socks.some((s) => s.fd > 4096 && s.portid !== 0), JSON.stringify(socks));
}

function logSockets(): Promise<void> {
  console.log(`agent's netfilter sockets: ${JSON.stringify(agentNetfilterSockets(agentPid()))}`);
  return Promise.resolve();
}

async function ownSyncsNotChecks(c: Ctx): Promise<void> {
  const { agent, aut: { api } } = c;
  const from = agent.lines.length, r0 = await repairCount(c.aut.metrics);
  // Endpoint swaps (raw element batches) and new Services (libnftables scripts).
  for (const eps of [[B], [A, B], [A], [A, B]]) {
    api.apply(slice("web", eps));
    await reaches(topo, "tcp", WEB, 80, eps.map((ip) => (ip === A ? "a" : "b")));
  }
  // The first IPv6 Service, then endpoint swaps: the IPv6 raw writer opens its socket now, past
  // the relayed connections' descriptors.
  const A6 = topo.podIPv6(0), B6 = topo.podIPv6(1);
  api.apply(service("web6", { ip: WEB6 }));
  api.apply(slice("web6", [A6, B6]));
  await reaches(topo, "tcp", WEB6, 80, ["a", "b"]);
  for (const eps of [[B6], [A6, B6], [A6], [A6, B6]]) {
    api.apply(slice("web6", eps));
    await reaches(topo, "tcp", WEB6, 80, eps.map((ip) => (ip === A6 ? "a" : "b")));
  }
  for (const [i, ip] of ["198.19.0.20", "198.19.0.21"].entries()) {
    api.apply(service(`extra${i}`, { ip }));
    api.apply(slice(`extra${i}`, [B]));
    await reaches(topo, "tcp", ip, 80, ["b"]);
  }
  await new Promise((r) => setTimeout(r, 1000));
  assert.deepEqual(suspicious(agent, from), []);
  assert.equal(await repairCount(c.aut.metrics), r0, "our own sync counted as a repair");
  await assertAlive(agent);
}

async function foreignElementRepaired(c: Ctx): Promise<void> {
  await repairedAfter(
    c,
    () => nft("delete", "element", "ip", "kube-proxy", "cluster-ips", `{ ${WEB} }`),
  );
  await eventually("the element back", async () => (await clusterIPs()).includes(WEB) || undefined);
}

/** `nft list set ip kube-proxy cluster-ips`. */
function clusterIPs(): Promise<string> {
  return nft("list", "set", "ip", "kube-proxy", "cluster-ips");
}

async function foreignRuleRepaired(c: Ctx): Promise<void> {
  const rule = ["ip", "daddr", WEB, "tcp", "dport", "80", "return"];
  await repairedAfter(c, () => nft("insert", "rule", "ip", "kube-proxy", "services", ...rule));
  await reaches(topo, "tcp", WEB, 80, ["a", "b"], 5_000);
  assert.doesNotMatch(await nft("list", "chain", "ip", "kube-proxy", "services"), /return/);
}

/** Ten foreign processes in a row (ten port ids, one scan): all restored; ours stay ours. */
async function foreignBurst(c: Ctx): Promise<void> {
  const { agent, aut: { api } } = c;
  const from0 = agent.lines.length, r0 = await repairCount(c.aut.metrics);
  for (let i = 0; i < 10; i++) {
    // Each its own process and port id; a delete may find the element gone already.
    const ip = i % 2 === 0 ? DNS : WEB;
    await run(["nft", "delete", "element", "ip", "kube-proxy", "cluster-ips", `{ ${ip} }`], {
      check: false,
    });
  }
  await eventually("the elements back", async () => {
    const set = await clusterIPs();
    return set.includes(DNS) && set.includes(WEB) || undefined;
  }, 5_000);
  await eventually(
    "the burst repaired",
    async () => (await repairCount(c.aut.metrics)) > r0 || undefined,
  );
  const lines = agent.lines.slice(from0).filter((l) => /restored/.test(l.text)).length;
  console.log(`burst: ${(await repairCount(c.aut.metrics)) - r0} repairs, ${lines} repair lines`);
  // Our next syncs are still not taken for foreign ones.
  await new Promise((r) => setTimeout(r, 1500));
  const from = agent.lines.length, r1 = await repairCount(c.aut.metrics);
  api.apply(slice("web", [B]));
  await reaches(topo, "tcp", WEB, 80, ["b"]);
  api.apply(slice("web", [A, B]));
  await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
  await new Promise((r) => setTimeout(r, 1000));
  assert.deepEqual(suspicious(agent, from), []);
  assert.equal(await repairCount(c.aut.metrics), r1);
  await assertAlive(agent);
}

const STEPS: readonly (readonly [string, (c: Ctx) => Promise<void>])[] = [
  ["cold start: every Service answers, the localhost NodePort too", coldStart],
  ["(sockets after the cold start)", logSockets],
  [`the localhost proxy holds ${HELD} connections`, holdConnections],
  [
    "our own syncs (the IPv6 raw writer's first among them) are neither checks nor repairs",
    ownSyncsNotChecks,
  ],
  ["the IPv6 raw writer's socket sits past fd 4096", () => Promise.resolve(socketsAreHigh())],
  ["a foreign nft deleting an element is repaired", foreignElementRepaired],
  ["a foreign nft adding a rule to our chain is repaired", foreignRuleRepaired],
  ["a burst of foreign batches is repaired; ours stay ours", foreignBurst],
];

Deno.test({
  name: "own socket: high descriptors",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const streams = [
      await startStream(topo.pods[0], "a"),
      await startStream(topo.pods[1], "b"),
    ];
    const aut = startAgent({
      objects: [
        node(),
        serviceCIDR(),
        service("web", { ip: WEB, nodePort: 30080 }),
        slice("web", [A, B]),
        service("dns", { ip: DNS, port: 53, protocol: "UDP" }),
        slice("dns", [A, B], "UDP"),
        lhService("lh", { ip: "198.19.0.30", nodePort: LH_PORT }),
        lhSlice("lh", [A, B]),
      ],
      minSyncPeriod: "200ms",
      args: ["--sync-period=1h", "--v=2", "--nodeport-addresses=primary,localhost"],
    });
    const c: Ctx = { aut, agent: aut.agent, held: [] };
    try {
      for (const [name, step] of STEPS) await t.step(name, () => step(c));
    } catch (err) {
      console.error(`--- agent output (last lines) ---\n${c.agent.tail(60)}`);
      throw err;
    } finally {
      for (const conn of c.held) {
        try {
          conn.close();
        } catch { /* closed */ }
      }
      await aut.close();
      for (const s of streams) await s.stop();
    }
  },
});

/** A table of this driver's own, for the in-process steps (not the agent's). */
const PROBE_TABLE = "knp_own_probe";

Deno.test({
  name: "in-process: our batch from a socket no scan finds is ours by its NEWGEN thread",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const warnings: string[] = [];
    // A source that never finds anything: as if the socket had closed before any scan.
    const own = new OwnSockets({ portids: () => new Set(), rescan: () => new Set() }, {
      log: (level, msg, fields) => warnings.push(`${level}: ${msg} ${JSON.stringify(fields)}`),
    });
    const monitor = new NftablesMonitor(own);
    const foreign: NftNotification[] = [];
    monitor.start({ onForeign: (m) => foreign.push(...m), onOverrun: () => {} });
    const ctx = new NftContext(undefined, 0);
    try {
      // Runs on a worker thread of this process: NEWGEN names that thread.
      assert.equal((await ctx.run(`add table ip ${PROBE_TABLE}\n`)).rc, 0);
      await eventually("the one warning", () => Promise.resolve(warnings.length > 0 || undefined));
      console.log(warnings[0]);
      assert.match(warnings[0], /counts as ours/);
      assert.equal(own.ids.size, 1);
      assert.equal(foreign.length, 0, JSON.stringify(foreign));
      // Another process's batch is foreign; ours stay ours, and nothing is logged again.
      await nft("add", "chain", "ip", PROBE_TABLE, "theirs");
      await eventually(
        "the foreign chain",
        () =>
          Promise.resolve(
            foreign.some((m) => m.kind === "chain" && m.name === "theirs") || undefined,
          ),
      );
      assert.ok(
        foreign.every((m) => m.kind !== "gen" || m.proc === "nft"),
        JSON.stringify(foreign),
      );
      const seen = foreign.length;
      assert.equal((await ctx.run(`add chain ip ${PROBE_TABLE} ours\n`)).rc, 0);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(foreign.length, seen, JSON.stringify(foreign.slice(seen)));
      assert.equal(warnings.length, 1);
    } finally {
      await run(["nft", "delete", "table", "ip", PROBE_TABLE], { check: false });
      ctx.free();
      await monitor.stop();
    }
  },
});

Deno.test({
  name: "in-process: a libnftables context past fd 1023 is refused, not an abort",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const c = libc();
    const path = new TextEncoder().encode("/dev/null\0");
    const fds: number[] = [];
    try {
      for (let fd = c.open(path, 0); fd >= 0 && fd < 1100; fd = c.open(path, 0)) fds.push(fd);
      assert.throws(() => openNftables("ip", PROBE_TABLE), /descriptor \d+: .*select\(2\)/);
      // A context opened before the descriptors filled keeps working.
    } finally {
      for (const fd of fds) c.close(fd);
    }
    const client = openNftables("ip", PROBE_TABLE);
    try {
      assert.equal(await client.list(), null);
    } finally {
      client.close();
    }
  },
});
