/**
 * `explain NAMESPACE/SERVICE`: a Service as this node has programmed it.
 * Found through the comments on its dispatch elements (every element we
 * write for a frontend carries the port id), then each frontend is traced
 * from a pod, from outside the node and from the node itself, so the
 * endpoints per traffic source (with their shares) are what the kernel would
 * pick, not what the API says.
 *
 * @module
 */
import type { Element } from "../../../ffi/nftables/types.ts";
import { classOfSet, FIXED } from "../names.ts";
import type { RulesetReader } from "./reader.ts";
import { type Packet, trace, type TraceResult } from "./tracer.ts";

/** Where explain's probe packets come from. */
export interface ExplainEnv {
  /** The node's addresses (NodePort destinations, `fib ... local`). */
  nodeIPs: string[];
  /** A pod address on this node (inside the pod network), for in-cluster traffic. */
  podIP?: string;
  /** An address outside the cluster, for external traffic. */
  outsideIP: string;
}

/** How one source reaches a frontend. */
export interface Reach {
  /** Where the packet comes from. */
  source: Packet["from"];
  /** What happens to it. */
  verdict: TraceResult["verdict"];
  /** The endpoints it may reach, with their shares. */
  endpoints: TraceResult["candidates"];
  /** Why, in words. */
  reason: string;
}

/** One destination of the Service. */
export interface ExplainedFrontend {
  /** Which kind of destination. */
  kind: "ClusterIP" | "ExternalIP/LoadBalancer" | "NodePort";
  /** `addr . proto . port` or `proto . nodePort`. */
  key: string;
  /** The elements carrying it: `map: key : value`. */
  elements: string[];
  /** Chains it dispatches to (a shared class chain, or chains of its own). */
  chains: string[];
  /** Source ranges, when loadBalancerSourceRanges filter it. */
  sourceRanges?: string[];
  /** How each source fares. */
  reach: Reach[];
}

/** One port of the Service. */
export interface ExplainedPort {
  /** `ns/name:port`. */
  id: string;
  /** Its destinations. */
  frontends: ExplainedFrontend[];
  /** ClientIP affinity sets in use (their names). */
  affinitySets: string[];
}

/** The Service as programmed. */
export interface Explained {
  /** `namespace/name`. */
  service: string;
  /** `IPv4` or `IPv6`. */
  family: string;
  /** Its ports. */
  ports: ExplainedPort[];
}

const DISPATCH: [string, boolean][] = [
  [FIXED.serviceIPs, false],
  [FIXED.serviceNodePorts, true],
  [FIXED.noEndpointServices, false],
  [FIXED.noEndpointNodePorts, true],
  [FIXED.firewallIPs, false],
];

const KIND_ORDER: ExplainedFrontend["kind"][] = [
  "ClusterIP",
  "ExternalIP/LoadBalancer",
  "NodePort",
];

/** The dispatch maps, then the class chains' frontends sets the class dispatch chains look up. */
async function dispatchPlaces(reader: RulesetReader): Promise<[string, boolean][]> {
  const out = [...DISPATCH];
  for (const [chain, nodePort] of [[FIXED.serviceClasses, false], [FIXED.nodePortDispatch, true]]) {
    for (const r of (await reader.rules(chain as string)) ?? []) {
      const set = /@(\S+)/.exec(r.rule)?.[1];
      if (set !== undefined && classOfSet(set) !== undefined) out.push([set, nodePort as boolean]);
    }
  }
  return out;
}

function text(map: string, e: Element): string {
  return `${map}: ${e.key.join(" . ")}${e.value ? ` : ${e.value.join(" . ")}` : ""}`;
}

/** Explains `service` (`namespace/name`) from what `reader` reads. */
export async function explain(
  reader: RulesetReader,
  service: string,
  env: ExplainEnv,
): Promise<Explained> {
  if (!/^[^/\s]+\/[^/\s]+$/.test(service)) {
    throw new Error(`explain: want NAMESPACE/SERVICE, got ${JSON.stringify(service)}`);
  }
  const ports = new Map<string, Map<string, ExplainedFrontend>>();
  const clusterIPs = new Set(
    (await reader.elements(FIXED.clusterIPs)).filter((e) => e.comment === service).map((e) =>
      e.key[0]
    ),
  );
  for (const [map, nodePort] of await dispatchPlaces(reader)) {
    for (const e of await reader.elements(map)) {
      const c = e.comment ?? "";
      if (!c.startsWith(`${service}:`)) continue;
      let fs = ports.get(c);
      if (fs === undefined) ports.set(c, fs = new Map());
      const key = e.key.join(" . ");
      let f = fs.get(key);
      if (f === undefined) {
        const addr = key.split(" . ")[0];
        const kind = nodePort
          ? "NodePort"
          : clusterIPs.has(addr)
          ? "ClusterIP"
          : "ExternalIP/LoadBalancer";
        fs.set(key, f = { kind, key, elements: [], chains: [], reach: [] });
      }
      f.elements.push(text(map, e));
      const target = classOfSet(map) ?? e.value?.join(" ").match(/^goto (\S+)$/)?.[1];
      if (target !== undefined && target !== FIXED.rejectChain) f.chains.push(target);
    }
  }
  const out: Explained = { service, family: reader.family, ports: [] };
  for (const [id, fs] of [...ports].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const port: ExplainedPort = { id, frontends: [], affinitySets: [] };
    for (const f of fs.values()) {
      for (const chain of f.chains) {
        const rules = (await reader.rules(chain)) ?? [];
        for (const r of rules) {
          for (const m of r.rule.matchAll(/@(affinity-\S+)/g)) {
            if (!port.affinitySets.includes(m[1])) port.affinitySets.push(m[1]);
          }
        }
        if (chain.startsWith("firewall-")) {
          f.sourceRanges = rules.map((r) => /^ip6? saddr (\S+) return$/.exec(r.rule)?.[1])
            .filter((x): x is string => x !== undefined);
        }
      }
      f.reach = await reachOf(reader, f, env);
      port.frontends.push(f);
    }
    port.frontends.sort((a, b) => KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind));
    out.ports.push(port);
  }
  return out;
}

/** Traces a new connection to the frontend from each kind of source. */
async function reachOf(
  reader: RulesetReader,
  f: ExplainedFrontend,
  env: ExplainEnv,
): Promise<Reach[]> {
  const parts = f.key.split(" . ");
  const v6 = reader.family === "ip6";
  // NodePorts answer on the addresses in nodeport-ips; loopback never does.
  const nodePortIP = (await reader.elements(FIXED.nodePortIPs))[0]?.key[0];
  const nodeIP = nodePortIP ??
    env.nodeIPs.find((a) => a.includes(":") === v6 && !/^(127\.|::1$)/.test(a));
  const [dst, proto, port] = f.kind === "NodePort"
    ? [nodeIP, parts[0], Number(parts[1])]
    : [parts[0], parts[1], Number(parts[2])];
  if (dst === undefined) return [];
  const sources: [Packet["from"], string | undefined][] = [
    ["pod", env.podIP],
    ["offnode", env.outsideIP],
    ["host", nodeIP],
  ];
  const out: Reach[] = [];
  for (const [from, src] of sources) {
    if (src === undefined || src.includes(":") !== v6) continue;
    const r = await trace(reader, {
      from,
      src,
      dst,
      proto: proto as Packet["proto"],
      dport: port,
    }, { nodeIPs: env.nodeIPs });
    out.push({ source: from, verdict: r.verdict, endpoints: r.candidates, reason: r.reason });
  }
  return out;
}
