/**
 * Hostile neighbours, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/neighbours_test.ts (env KNP_TOPO; pods 0 and 1 run echo servers "a" and "b").
 *
 * Other programs share the node's nftables: tables full of features our listing parser may not
 * know (comments, named objects, ct helpers, odd set flags, netdev and inet tables at our hooks),
 * a set written the way a newer nft writes it (libnftables 1.0.x crashes reading it), and
 * programs that delete our chains and elements or add their own rules and chains to our table.
 * The agent must keep syncing through all of it (cold start, partial, trace/explain, --cleanup).
 * --sync-period is an hour: only the kernel's change notifications can explain a repair. Each
 * foreign change to our table (a deleted element, chain, set or the table itself, a flushed chain,
 * a foreign rule, chain or set) must be restored within 2 s, the intruders removed as kube-proxy
 * would (it owns the table), each repair logged and counted; our own syncs never count as one.
 * Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { run } from "../netns.ts";
import { CLIENT4 } from "../topology.ts";
import { AgentProcess, eventually } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import { assertAlive, repairCount, repairedAfter } from "./fixtures/repair_steps.ts";
import {
  addSetWithUdata,
  deleteTableRaw,
  EXOTIC_RULESET,
  FLOWTABLE_RULESET,
} from "./fixtures/foreign_nft.ts";
import {
  attachTopology,
  nft,
  nftScript,
  nftTable,
  node,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/neighbours_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.10", STICKY = "198.19.0.11", DNS = "198.19.0.53";
/** Probes after a repair: real traffic restored (slack for the probes on a busy host). */
const TRAFFIC_MS = 5_000;

/** Lines of `nft list chains ip` in our table whose name contains `part`. */
async function ourChains(part: string): Promise<string[]> {
  const text = await nft("list", "chains", "ip");
  const out: string[] = [];
  let ours = false;
  for (const l of text.split("\n")) {
    const t = /^table (\S+) (\S+)/.exec(l);
    if (t) ours = t[1] === "ip" && t[2] === "kube-proxy";
    const c = /^\s*chain (\S+) \{/.exec(l);
    if (ours && c && c[1].includes(part)) out.push(c[1]);
  }
  return out;
}

/** The agent under test as {@link startAgent} returns it. */
type Aut = ReturnType<typeof startAgent>;

/** What every step shares: the agent, its API server and the neighbours' table before it started. */
interface Ctx {
  aut: Aut;
  agent: AgentProcess;
  /** The `exotic` table's structure, without what traffic changes. */
  exotic: () => Promise<string>;
  exoticBefore: string;
}

/** The agent (not started yet) with the Services every step probes. */
function agentUnderTest(): Aut {
  return startAgent({
    objects: [
      node(),
      serviceCIDR(),
      service("web", { ip: WEB, nodePort: 30080 }),
      slice("web", [A, B]),
      service("dns", { ip: DNS, port: 53, protocol: "UDP" }),
      slice("dns", [A, B], "UDP"),
      service("sticky", { ip: STICKY, sticky: true }),
      slice("sticky", [A, B]),
      service("web6", { ip: "2001:db8:ffff::10" }),
      slice("web6", [topo.podIPv6(0), topo.podIPv6(1)]),
    ],
    minSyncPeriod: "200ms",
    args: ["--sync-period=1h", "--v=2"],
    deferStart: true,
  });
}

/** Everything the other programs own, before the agent ever starts; returns their structure. */
async function installNeighbours(): Promise<Pick<Ctx, "exotic" | "exoticBefore">> {
  await nftScript(EXOTIC_RULESET);
  const flow = await run(["nft", "-f", "-"], { stdin: FLOWTABLE_RULESET, check: false });
  if (flow.code !== 0) {
    console.log(`note: no flowtable tested, this kernel refuses one: ${flow.stderr.trim()}`);
  }
  // Their structure, without what traffic changes (counters, quota use, dynamic elements).
  const exotic = async () =>
    (await nft("-t", "list", "table", "ip", "exotic"))
      .replace(/packets \d+ bytes \d+/g, "")
      .replace(/ used \d+ \w+/g, "");
  return { exotic, exoticBefore: await exotic() };
}

/** Diagnosis: KNP_NFT_MONITOR=FILE records every ruleset change in this namespace. */
function startMonitor(): Deno.ChildProcess | undefined {
  const monitorFile = Deno.env.get("KNP_NFT_MONITOR");
  return monitorFile
    ? new Deno.Command("sh", {
      args: ["-c", `exec nft monitor > '${monitorFile.replaceAll("'", "")}'`],
      stdin: "null",
    }).spawn()
    : undefined;
}

async function coldStart(c: Ctx): Promise<void> {
  await c.aut.healthy();
  await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
  await reaches(topo, "udp", DNS, 53, ["a", "b"]);
  await reaches(topo, "tcp", STICKY, 80, "any");
  await reaches(topo, "tcp", "2001:db8:ffff::10", 80, ["a", "b"]);
}

async function ownSyncsNotRepairs(c: Ctx): Promise<void> {
  const { agent, aut: { api } } = c;
  const from = agent.lines.length;
  const r0 = await repairCount(c.aut.metrics);
  for (const eps of [[B], [A, B], [B]]) {
    api.apply(slice("web", eps));
    await reaches(topo, "tcp", WEB, 80, eps.map((ip) => (ip === A ? "a" : "b")));
  }
  api.apply(service("extra", { ip: "198.19.0.20" }));
  api.apply(slice("extra", [A]));
  await reaches(topo, "tcp", "198.19.0.20", 80, ["a"]);
  await new Promise((r) => setTimeout(r, 1000));
  const later = agent.lines.slice(from).map((l) => l.text);
  assert.deepEqual(
    later.filter((l) => /Sync failed|restored|checking what it touched/.test(l)),
    [],
  );
  assert.equal(await repairCount(c.aut.metrics), r0, "our own sync counted as a repair");
  await assertAlive(agent);
}

async function traceAndExplain(): Promise<void> {
  const tr = await AgentProcess.run(["trace", "--from", CLIENT4, "--to", `${WEB}:80/tcp`]);
  assert.equal(tr.code, 0, tr.output);
  assert.match(tr.output, new RegExp(B.replaceAll(".", "\\.")));
  const ex = await AgentProcess.run(["explain", "default/sticky"]);
  assert.equal(ex.code, 0, ex.output);
  assert.match(ex.output, new RegExp(A.replaceAll(".", "\\.")));
}

async function deletedDispatchElement(c: Ctx): Promise<void> {
  await repairedAfter(
    c,
    // WEB has one endpoint: its frontend is in the set of class chain dnat-tcp-1.
    () =>
      nft("delete", "element", "ip", "kube-proxy", "frontends-dnat-tcp-1", `{ ${WEB} . tcp . 80 }`),
  );
  await reaches(topo, "tcp", WEB, 80, ["b"], TRAFFIC_MS);
}

async function deletedClusterIPElement(c: Ctx): Promise<void> {
  await repairedAfter(
    c,
    () => nft("delete", "element", "ip", "kube-proxy", "cluster-ips", `{ ${WEB} }`),
  );
  const set = await nft("list", "set", "ip", "kube-proxy", "cluster-ips");
  assert.ok(set.includes(WEB), set);
}

async function deletedServiceChain(c: Ctx): Promise<void> {
  const [chain] = await ourChains("default/sticky/");
  assert.ok(chain, "the ClientIP-affinity Service has no chain of its own");
  // The kernel refuses to delete a chain a map element points to: the element goes first.
  await repairedAfter(c, () =>
    nftScript(
      `delete element ip kube-proxy service-ips { ${STICKY} . tcp . 80 }\n` +
        `delete chain ip kube-proxy ${chain}\n`,
    ));
  assert.deepEqual(await ourChains("default/sticky/"), [chain]);
  await reaches(topo, "tcp", STICKY, 80, "any", TRAFFIC_MS);
}

async function foreignRuleRemoved(c: Ctx): Promise<void> {
  // Sends the web Service around the dispatch: it stops answering until the rule goes.
  const rule = ["ip", "daddr", WEB, "tcp", "dport", "80", "return"];
  await repairedAfter(c, () => nft("insert", "rule", "ip", "kube-proxy", "services", ...rule));
  await reaches(topo, "tcp", WEB, 80, ["b"], TRAFFIC_MS);
  const services = await nft("list", "chain", "ip", "kube-proxy", "services");
  assert.doesNotMatch(services, /return/, services);
}

async function flushedClassChain(c: Ctx): Promise<void> {
  // web has one endpoint now: its ClusterIP dispatches to the class chain dnat-tcp-1*.
  const [cls] = (await ourChains("dnat-tcp-1")).filter((n) => /^dnat-tcp-1(-g\d+)?$/.test(n));
  assert.ok(cls, "no class chain for one TCP endpoint");
  await repairedAfter(c, () => nft("flush", "chain", "ip", "kube-proxy", cls));
  await reaches(topo, "tcp", WEB, 80, ["b"], TRAFFIC_MS);
}

async function deletedSet(c: Ctx): Promise<void> {
  // cluster-ips is used by the services and cluster-ips-check chains.
  await repairedAfter(c, () =>
    nftScript(
      "flush chain ip kube-proxy services\n" +
        "flush chain ip kube-proxy cluster-ips-check\n" +
        "delete set ip kube-proxy cluster-ips\n",
    ));
  const set = await nft("list", "set", "ip", "kube-proxy", "cluster-ips");
  assert.ok(set.includes(WEB) && set.includes(DNS), set);
  await reaches(topo, "tcp", WEB, 80, ["b"], TRAFFIC_MS);
  await reaches(topo, "udp", DNS, 53, ["a", "b"], TRAFFIC_MS);
}

async function flushedBucket(c: Ctx): Promise<void> {
  const maps = await nft("-t", "list", "table", "ip", "kube-proxy");
  const bucket = /map (endpoints-tcp(?:-g\d+)?) \{/.exec(maps)?.[1];
  assert.ok(bucket, maps);
  await repairedAfter(c, () => nft("flush", "map", "ip", "kube-proxy", bucket));
  await reaches(topo, "tcp", WEB, 80, ["b"], TRAFFIC_MS);
  await reaches(topo, "tcp", STICKY, 80, "any", TRAFFIC_MS);
}

async function intrudersRemoved(c: Ctx): Promise<void> {
  await repairedAfter(c, () =>
    nftScript(
      [
        "add chain ip kube-proxy intruder",
        "add rule ip kube-proxy intruder counter",
        "add chain ip kube-proxy intruder-base { type filter hook input priority 5; policy accept; }",
        "add rule ip kube-proxy intruder-base jump intruder",
        "add set ip kube-proxy intruder-set { type ipv4_addr; }",
        "",
      ].join("\n"),
    ));
  // Flushed at once, deleted a moment later (chains only go once nothing refers to them).
  await eventually("the intruders gone", async () => {
    const chains = await ourChains("intruder");
    const sets = await nft("list", "sets", "table", "ip", "kube-proxy");
    return chains.length === 0 && !sets.includes("intruder-set") || undefined;
  }, TRAFFIC_MS);
  await reaches(topo, "tcp", WEB, 80, ["b"]);
  await reaches(topo, "udp", DNS, 53, ["a", "b"]);
}

async function deletedTable(c: Ctx): Promise<void> {
  await repairedAfter(c, () => nft("delete", "table", "ip", "kube-proxy"));
  await reaches(topo, "tcp", WEB, 80, ["b"], TRAFFIC_MS);
  await reaches(topo, "udp", DNS, 53, ["a", "b"], TRAFFIC_MS);
  await reaches(topo, "tcp", STICKY, 80, "any", TRAFFIC_MS);
}

async function newerNftSet(c: Ctx): Promise<void> {
  const { agent, aut: { api } } = c;
  const from = agent.lines.length;
  // In an ip6 table: libnftables 1.0.x loads every family's sets for an `ip` command.
  await addSetWithUdata("ip6", "newer-nft", "typeof-set");
  // An endpoint swap is elements only: it goes over plain netlink and still lands.
  api.apply(slice("web", [A]));
  await reaches(topo, "tcp", WEB, 80, ["a"]);
  // A new Service with a chain of its own needs libnftables: refused, and said so.
  api.apply(service("sticky2", { ip: "198.19.0.12", sticky: true }));
  api.apply(slice("sticky2", [A]));
  const err = await agent.waitForLine(/newer-nft/, 10_000, from);
  assert.match(err.text, /Sync failed/);
  await assertAlive(agent);
  await reaches(topo, "udp", DNS, 53, ["a", "b"]);
  await reaches(topo, "tcp", WEB, 80, ["a"]);
  const tr = await AgentProcess.run(["trace", "--from", CLIENT4, "--to", `${WEB}:80/tcp`]);
  assert.equal(tr.code, 0, `trace with the set present:\n${tr.output}`);
  assert.match(tr.output, new RegExp(A.replaceAll(".", "\\.")));
  await deleteTableRaw("ip6", "newer-nft");
  await reaches(topo, "tcp", "198.19.0.12", 80, ["a"], 30_000);
  await assertAlive(agent);
}

async function cleanupKeepsNeighbours(c: Ctx): Promise<void> {
  const st = await c.agent.stop("SIGTERM");
  assert.equal(st.code, 0, c.agent.tail());
  await addSetWithUdata("ip6", "newer-nft", "typeof-set");
  const cl = await AgentProcess.run(["--cleanup"]);
  assert.equal(cl.code, 0, cl.output);
  assert.equal(await nftTable("ip"), undefined, "ip kube-proxy still there");
  assert.equal(await nftTable("ip6"), undefined, "ip6 kube-proxy still there");
  await deleteTableRaw("ip6", "newer-nft");
  assert.equal(await c.exotic(), c.exoticBefore);
  await nft("list", "table", "netdev", "exotic_nd");
  await nft("list", "table", "inet", "exotic_inet");
}

/** The steps, in order: each one builds on the table and endpoints the one before left. */
const STEPS: readonly (readonly [string, (c: Ctx) => Promise<void>])[] = [
  ["cold start with exotic neighbours: every Service answers", coldStart],
  ["our own syncs are never taken for a foreign change", ownSyncsNotRepairs],
  ["trace and explain read our table next to the neighbours", traceAndExplain],
  ["a deleted dispatch element is restored", deletedDispatchElement],
  ["a deleted ClusterIP element of cluster-ips is restored", deletedClusterIPElement],
  ["a deleted service chain (and its element) is restored", deletedServiceChain],
  ["a rule another program adds to our chain is removed", foreignRuleRemoved],
  ["a flushed class chain is refilled", flushedClassChain],
  ["a deleted set (its chains flushed first) is declared and filled again", deletedSet],
  ["a deleted endpoint bucket element moves to a fresh generation", flushedBucket],
  ["a foreign chain, set and base chain in our table are removed", intrudersRemoved],
  ["our deleted table is rebuilt", deletedTable],
  ["a set a newer nft wrote: no crash, a clear error, recovery", newerNftSet],
  ["SIGTERM, then --cleanup: our tables go, the neighbours' stay", cleanupKeepsNeighbours],
];

Deno.test({
  name: "neighbours: other programs' tables and changes to ours",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const aut = agentUnderTest();
    const neighbours = await installNeighbours();
    const monitor = startMonitor();
    const agent = aut.start();
    const c: Ctx = { aut, agent, ...neighbours };
    try {
      for (const [name, step] of STEPS) await t.step(name, () => step(c));
    } catch (err) {
      console.error(`--- agent output (last lines) ---\n${agent.tail(60)}`);
      throw err;
    } finally {
      await aut.close();
      try {
        monitor?.kill("SIGTERM");
      } catch { /* gone */ }
      await monitor?.status;
    }
  },
});
