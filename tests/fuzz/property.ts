/**
 * The fuzzed-cluster-state property: a random cluster and random changes go through the
 * agent's pipeline (tests/fuzz/pipeline.ts), and after every step
 *
 * 1. the trackers and proxiers complain about nothing (the input is valid);
 * 2. for a sample of packets, the packet tracer's reading of the programmed ruleset (verdict,
 *    candidate endpoints with their shares, masquerade, affinity timeout) equals the
 *    independent reference model's answer (tests/fuzz/reference_model.ts);
 * 3. once stale chains are gone, each family's table equals what a cold-started agent
 *    programs for the same objects.
 *
 * @module
 */
import type { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { NftablesClient, TableState } from "../../ffi/nftables/types.ts";
import type { ProxierConfig } from "../../proxier/model.ts";
import { familyOfText, type IpFamily } from "../../net/family.ts";
import { canonicalBuckets } from "../../proxier/nftables/testing.ts";
import { tableReader } from "../../proxier/nftables/trace/reader.ts";
import { trace, type TraceResult } from "../../proxier/nftables/trace/tracer.ts";
import { ClusterFuzzer, NET, rng, type World } from "./cluster_gen.ts";
import { AgentPipeline, type SyncResults } from "./pipeline.ts";
import { addr, expect, type Expected, type ModelPacket, type Obj } from "./reference_model.ts";

/** The proxy configuration the model describes. */
export const FUZZ_CONFIG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: [...NET.clusterCIDRs] },
  nodePortAddresses: [],
};

/** Settings of one fuzz run. */
export interface FuzzOptions {
  seed: number;
  steps: number;
  /** Services in the initial cluster (default 12). */
  services?: number;
  /** Packets traced per step, sampled from all candidates (0: all of them). */
  packetsPerStep?: number;
  /** Ask for a full sync every this many steps, as the engine's periodic check does (default 7). */
  fullEvery?: number;
  /** Clients to program (default: MemoryNftables); `fakes` then names the fakes to compare. */
  clients?: Record<IpFamily, NftablesClient>;
  fakes?: Record<IpFamily, MemoryNftables>;
  /** Runs after each step's checks, with the pipeline (e.g. to compare the kernel's tables). */
  afterStep?: (step: number, p: AgentPipeline) => Promise<void>;
}

/** What a run did. */
export interface FuzzStats {
  seed: number;
  steps: number;
  events: number;
  packets: number;
  syncs: { full: number; partial: number; ops: number };
  /** Traced packets by the model's verdict and reason. */
  coverage: Record<string, number>;
  seconds: number;
}

const fam = familyOfText;

/** Runs one seed; throws on the first property violation, with the details to reproduce it. */
export async function runFuzz(o: FuzzOptions): Promise<FuzzStats> {
  const t0 = performance.now();
  const fz = new ClusterFuzzer({ seed: o.seed, services: o.services });
  const pick = rng(o.seed ^ 0x5eed);
  let clock = 0;
  const popts = { nodeName: fz.world.nodeName, config: FUZZ_CONFIG, now: () => clock };
  const agent = await AgentPipeline.create({ ...popts, clients: o.clients });
  const fakes = o.fakes ?? (agent.clients as Record<IpFamily, MemoryNftables>);
  const stats: FuzzStats = {
    seed: o.seed,
    steps: o.steps,
    events: 0,
    packets: 0,
    syncs: { full: 0, partial: 0, ops: 0 },
    coverage: {},
    seconds: 0,
  };
  const count = (r: SyncResults) => {
    for (const f of [4, 6] as const) {
      const x = r[f];
      if (x === null) continue;
      if (x.full) stats.syncs.full++;
      else stats.syncs.partial++;
      stats.syncs.ops += x.ops;
    }
  };
  for (let step = 0; step <= o.steps; step++) {
    const where = `seed ${o.seed}, step ${step}`;
    const events = step === 0 ? fz.initial() : fz.step();
    stats.events += events.length;
    for (const ev of events) agent.deliver(ev);
    if (step > 0 && step % (o.fullEvery ?? 7) === 0) {
      for (const f of [4, 6] as const) agent.proxiers[f].requestFullSync("periodic check");
    }
    count(await agent.sync());
    if (agent.complaints.length > 0) {
      throw new Error(`${where}: valid objects drew complaints:\n${agent.complaints.join("\n")}`);
    }
    stats.packets += await checkPackets(fz.world, agent, pick, o.packetsPerStep ?? 0, where, stats);
    // The engine's follow-up sync, a stale-chain delay later, deletes what was retired.
    clock += 5000;
    count(await agent.sync());
    // The engine's periodic check: a full sync over an intact table must write nothing (any
    // operation would be counted and logged as repairing another program's change).
    for (const f of [4, 6] as const) agent.proxiers[f].requestFullSync("periodic check");
    const check = await agent.sync();
    for (const f of [4, 6] as const) {
      if ((check[f]?.ops ?? 0) > 0) {
        throw new Error(
          `${where}: a full sync over an intact IPv${f} table wrote ${check[f]!.ops} operations`,
        );
      }
    }
    const fresh = await AgentPipeline.coldStart(popts, fz.world.snapshot());
    if (fresh.complaints.length > 0) {
      throw new Error(`${where}: a cold start drew complaints:\n${fresh.complaints.join("\n")}`);
    }
    for (const f of [4, 6] as const) {
      const got = canonicalBuckets(fakes[f].dump());
      const want = canonicalBuckets((fresh.clients[f] as MemoryNftables).dump());
      if (got !== want) {
        throw new Error(`${where}: IPv${f} table differs from a cold start's:\n${diff(got, want)}`);
      }
    }
    await o.afterStep?.(step, agent);
  }
  stats.seconds = (performance.now() - t0) / 1000;
  return stats;
}

/** The first lines where two dumps differ, with a little context. */
function diff(got: string, want: string): string {
  const a = got.split("\n"), b = want.split("\n");
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  const show = (l: string[]) => l.slice(Math.max(0, i - 3), i + 6).join("\n");
  return `--- after the partial syncs (line ${i + 1}):\n${show(a)}\n--- cold start:\n${show(b)}`;
}

/** Traces a sample of packets in both families and compares them with the model. */
async function checkPackets(
  world: World,
  agent: AgentPipeline,
  r: () => number,
  cap: number,
  where: string,
  stats: FuzzStats,
): Promise<number> {
  let list = candidatePackets(world, r);
  if (cap > 0) {
    for (let i = list.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [list[i], list[j]] = [list[j], list[i]];
    }
    list = list.slice(0, cap);
  }
  const tables: Record<IpFamily, TableState | null> = {
    4: await agent.clients[4].list(),
    6: await agent.clients[6].list(),
  };
  const model = world.model();
  const cfg = { nodeName: world.nodeName, clusterCIDRs: [...NET.clusterCIDRs] };
  for (const pkt of list) {
    const f = fam(pkt.dst);
    const table = tables[f];
    if (table === null) throw new Error(`${where}: no IPv${f} table`);
    const want = expect(model, cfg, pkt);
    const got = await trace(tableReader(table), pkt, { nodeIPs: [NET.nodeIP[f]] });
    const problem = compare(want, got, table);
    if (problem !== undefined) {
      throw new Error(
        `${where}: ${problem}\npacket ${JSON.stringify(pkt)}\nmodel: ${JSON.stringify(want)}\n` +
          `tracer: ${got.verdict} ${JSON.stringify(got.candidates)} (${got.reason})\n` +
          `path: ${
            got.branches[0].steps.map((s) => `${s.chain}: ${s.rule ?? ""} ${s.element ?? ""}`).join(
              "\n  ",
            )
          }\n` +
          `objects:\n${related(world, pkt).join("\n")}`,
      );
    }
    for (
      const k of [
        `${want.verdict} ${want.why}`,
        ...(want.verdict === "ACCEPT" ? want.tags ?? [] : []),
      ]
    ) {
      stats.coverage[k] = (stats.coverage[k] ?? 0) + 1;
    }
  }
  return list.length;
}

/** The API objects that mention the packet's destination or port, for a failure report. */
function related(world: World, pkt: ModelPacket): string[] {
  const out: string[] = [];
  for (const s of world.services.values()) {
    const text = JSON.stringify(s);
    if (!text.includes(`"${pkt.dst}"`) && !text.includes(`"nodePort":${pkt.dport}`)) continue;
    out.push(
      JSON.stringify({ metadata: { name: s.metadata.name }, spec: s.spec, status: s.status }),
    );
    for (const sl of world.slices.values()) {
      if (sl.metadata.labels["kubernetes.io/service-name"] !== s.metadata.name) continue;
      if (sl.metadata.namespace !== s.metadata.namespace) continue;
      out.push(
        `  ${
          JSON.stringify({
            name: sl.metadata.name,
            addressType: sl.addressType,
            endpoints: sl.endpoints,
            ports: sl.ports,
          })
        }`,
      );
    }
  }
  out.push(`node labels: ${JSON.stringify(world.node.metadata.labels)}`);
  return out;
}

/** `ip:port` / `[ip]:port` -> a comparable key. */
function targetKey(ip: string, port: number): string {
  return `${addr(ip)!.n}|${port}`;
}

/** Why the tracer's answer is not the model's, or undefined when they agree. */
function compare(want: Expected, got: TraceResult, table: TableState): string | undefined {
  if (want.verdict !== got.verdict) return `verdict ${got.verdict}, the model says ${want.verdict}`;
  if (want.verdict !== "ACCEPT") return undefined;
  const cands = new Map(got.candidates.map((c) => {
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(c.dnat)!;
    return [targetKey(m[1], Number(m[2])), c];
  }));
  if (cands.size !== want.targets.length) {
    return `${cands.size} DNAT targets, the model says ${want.targets.length}`;
  }
  for (const t of want.targets) {
    const c = cands.get(targetKey(t.ip, t.port));
    if (c === undefined) return `endpoint ${t.ip}:${t.port} is not a DNAT target`;
    if (Math.abs(c.probability - 1 / want.targets.length) > 1e-9) {
      return `endpoint ${t.ip}:${t.port} gets ${c.probability}, not 1/${want.targets.length}`;
    }
    if (c.masquerade !== t.masquerade) {
      return `endpoint ${t.ip}:${t.port}: masquerade ${c.masquerade}, the model says ${t.masquerade}`;
    }
  }
  for (const b of got.branches) {
    if ((b.dnat !== undefined) !== (want.targets.length > 0)) {
      return want.targets.length > 0
        ? "some connections pass untranslated"
        : `translated to ${b.dnat}, the model says untouched`;
    }
    if (b.dnat === undefined) {
      if (b.masquerade) return "an untranslated packet is masqueraded";
      continue;
    }
    const sets = b.steps.flatMap((s) =>
      [...(s.rule ?? "").matchAll(/update @(\S+)/g)].map((m) => m[1])
    );
    if (want.stickySeconds === undefined) {
      if (sets.length > 0) return `affinity recorded (${sets[0]}) for a Service without affinity`;
      continue;
    }
    if (sets.length === 0) return `no ClientIP affinity recorded on the way to ${b.dnat}`;
    for (const name of sets) {
      const timeout = table.sets.get(name)?.set.timeout;
      if (timeout !== want.stickySeconds) {
        return `affinity set ${name} times out after ${timeout}s, not ${want.stickySeconds}s`;
      }
    }
  }
  return undefined;
}

/** Packets worth sending in the current world: every frontend, right and wrong, from everywhere. */
function candidatePackets(world: World, r: () => number): ModelPacket[] {
  const out: ModelPacket[] = [];
  const pk = (from: ModelPacket["from"], src: string, dst: string, proto: string, dport: number) =>
    out.push({ from, src, dst, proto: proto.toLowerCase() as ModelPacket["proto"], dport });
  const other = (p: string) => (p === "TCP" ? "UDP" : p === "UDP" ? "SCTP" : "TCP");
  for (const svc of world.services.values()) {
    const spec = svc.spec;
    const cips = (spec.clusterIPs ?? []).filter((a: string) => a !== "None");
    const lbs = (svc.status?.loadBalancer?.ingress ?? []).filter((i: Obj) => i.ip).map((i: Obj) =>
      i.ip
    );
    for (const port of spec.ports ?? []) {
      const proto: string = port.protocol;
      for (const ip of cips) {
        const f = fam(ip);
        pk("pod", podSource(world, svc, f, r), ip, proto, port.port);
        pk("offnode", NET.remotePod[f], ip, proto, port.port);
        pk("offnode", NET.clientA[f], ip, proto, port.port);
        pk("host", NET.nodeIP[f], ip, proto, port.port);
        pk("pod", NET.localPods[f][0], ip, proto, port.port % 65535 + 1);
        pk("offnode", NET.clientA[f], ip, other(proto), port.port);
      }
      if (port.nodePort) {
        for (const f of [4, 6] as const) {
          const node = NET.nodeIP[f];
          pk("offnode", NET.clientA[f], node, proto, port.nodePort);
          pk("offnode", NET.remotePod[f], node, proto, port.nodePort);
          pk("pod", podSource(world, svc, f, r), node, proto, port.nodePort);
          pk("host", node, node, proto, port.nodePort);
          pk("offnode", NET.clientA[f], node, other(proto), port.nodePort);
        }
      }
      for (const ip of spec.externalIPs ?? []) {
        const f = fam(ip);
        pk("offnode", NET.clientA[f], ip, proto, port.port);
        pk("pod", podSource(world, svc, f, r), ip, proto, port.port);
        pk("host", NET.nodeIP[f], ip, proto, port.port);
      }
      for (const ip of lbs) {
        const f = fam(ip);
        pk("offnode", NET.clientA[f], ip, proto, port.port);
        pk("offnode", NET.clientB[f], ip, proto, port.port);
        pk("offnode", ip, ip, proto, port.port); // the VIP itself as the source
        pk("host", NET.nodeIP[f], ip, proto, port.port);
        pk("pod", podSource(world, svc, f, r), ip, proto, port.port);
        pk("offnode", NET.clientA[f], ip, proto, port.port % 65535 + 1);
      }
    }
  }
  for (const f of [4, 6] as const) {
    pk("pod", NET.localPods[f][0], NET.unallocated[f], "TCP", 80);
    pk("offnode", NET.clientA[f], NET.elsewhere[f], "UDP", 53);
    pk("offnode", NET.clientA[f], NET.nodeIP[f], "TCP", 22);
  }
  return out;
}

/** A pod on this node: now and then one of the Service's own local endpoints (hairpin). */
function podSource(world: World, svc: Obj, f: IpFamily, r: () => number): string {
  const own: string[] = [];
  for (const sl of world.slices.values()) {
    if (sl.metadata.namespace !== svc.metadata.namespace) continue;
    if (sl.metadata.labels["kubernetes.io/service-name"] !== svc.metadata.name) continue;
    for (const e of sl.endpoints ?? []) {
      if (e.nodeName === world.nodeName && fam(e.addresses[0]) === f) own.push(e.addresses[0]);
    }
  }
  if (own.length > 0 && r() < 0.4) return own[Math.floor(r() * own.length)];
  return NET.localPods[f][Math.floor(r() * NET.localPods[f].length)];
}
