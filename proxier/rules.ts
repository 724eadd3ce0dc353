/**
 * The rule builder: cluster state in, nftables fragments out. Pure functions.
 *
 * Layout (see docs/dataplane.md): a fixed skeleton of base chains, dispatch
 * chains and a few big verdict maps, each map bound by exactly one rule; and
 * per service port a handful of chains with one rule per endpoint. No
 * anonymous sets, no inline vmaps, no set shared by every service chain:
 * those make the kernel's transaction cost super-linear.
 *
 * @module
 */
import type { Chain, Map as NftMap, Set as NftSet } from "../ffi/nftables/types.ts";
import type { BuiltRuleset, ChainSpec, ElementSpec, Fragment } from "./fragment.ts";
import {
  categorizeEndpoints,
  externallyAccessible,
  usesClusterEndpoints,
  usesLocalEndpoints,
  ZONE_LABEL,
} from "./categorize.ts";
import { cidrContains, ipFamily, parseCIDR, parseIP } from "./ip.ts";
import type {
  EndpointInfo,
  IpFamily,
  NodeInfo,
  ProxierConfig,
  ProxyState,
  ServicePortInfo,
} from "./model.ts";
import { affinitySetName, N, serviceChainNames, TABLE } from "./names.ts";

/**
 * Everything besides services and endpoints that shapes the rules. When it
 * changes (see {@link contextKey}) every service port must be rebuilt.
 */
export interface BuildContext {
  family: IpFamily;
  /** nft table family and address selector prefix: `ip` or `ip6`. */
  ip: "ip" | "ip6";
  /** nft address type: `ipv4_addr` or `ipv6_addr`. */
  addrType: "ipv4_addr" | "ipv6_addr";
  /** The node as topology needs it: name and zone label only. */
  node: NodeInfo;
  /** Node IPs of this family. */
  nodeIPs: string[];
  /** Addresses that accept NodePort traffic, or "all" for every local address. */
  nodePortIPs: string[] | "all";
  serviceCIDRs: string[];
  /** The masquerade mark, formatted as nft prints it (`0x00004000`). */
  masqMark: string;
  masqueradeAll: boolean;
  /** Alternative matches that each mean "from a pod on this node"; [] when undetectable. */
  localMatches: string[];
  /** A match meaning "not from a pod on this node", or undefined when undetectable. */
  notLocal: string | undefined;
  /** Problems worth logging (e.g. localhost nodePortAddresses). Not part of the key. */
  warnings: string[];
}

/** Longest comment nft accepts. */
const COMMENT_MAX = 128;

function isLoopback(ip: string): boolean {
  const p = parseIP(ip);
  if (!p) return false;
  return p.family === 4 ? p.bytes[0] === 127 : p.bytes.every((b, i) => b === (i === 15 ? 1 : 0));
}

/**
 * Derives the per-sync build context. Throws on configuration that cannot
 * be turned into rules, naming the bad value.
 */
export function buildContext(state: ProxyState, cfg: ProxierConfig): BuildContext {
  const fam = state.family;
  if (fam !== 4 && fam !== 6) throw new Error(`ProxyState.family must be 4 or 6, got ${fam}`);
  const bit = cfg.masqueradeBit;
  if (!Number.isInteger(bit) || bit < 0 || bit > 31) {
    throw new Error(`masqueradeBit must be an integer 0-31, got ${bit}`);
  }
  const ip = fam === 4 ? "ip" : "ip6";
  const warnings: string[] = [];
  const nodeIPs = state.node.ips.filter((a) => ipFamily(a) === fam);
  const podCIDRs = state.node.podCIDRs.filter((c) => parseCIDR(c)?.family === fam);

  // nodePortAddresses: "primary" and/or CIDRs; only this family's entries count.
  const npa = cfg.nodePortAddresses.length === 0 ? ["primary"] : cfg.nodePortAddresses;
  let nodePortIPs: string[] | "all" = [];
  const chosen = new Set<string>();
  for (const entry of npa) {
    if (entry === "primary") {
      for (const a of nodeIPs) chosen.add(a);
      continue;
    }
    const c = parseCIDR(entry);
    if (!c) {
      throw new Error(
        `nodePortAddresses entry ${JSON.stringify(entry)} is neither "primary" nor a CIDR`,
      );
    }
    if (c.family !== fam) continue;
    if (c.prefix === 0) {
      nodePortIPs = "all";
      break;
    }
    const loopNet = fam === 4 ? parseIP("127.0.0.1")! : parseIP("::1")!;
    if (cidrContains(c, loopNet)) {
      warnings.push(
        `nodePortAddresses ${entry} includes localhost, but localhost NodePorts are not supported`,
      );
    }
    for (const a of nodeIPs) if (cidrContains(c, parseIP(a)!)) chosen.add(a);
  }
  if (nodePortIPs !== "all") {
    nodePortIPs = [...chosen].filter((a) => {
      if (!isLoopback(a)) return true;
      warnings.push(`node IP ${a} is a loopback address; localhost NodePorts are not supported`);
      return false;
    });
    if (nodePortIPs.length === 0) {
      warnings.push(
        `no IPv${fam} node address matches nodePortAddresses [${npa.join(", ")}]: ` +
          `IPv${fam} NodePorts will not be reachable`,
      );
    }
  }

  // Local traffic detection (--detect-local-mode).
  let localMatches: string[] = [];
  let notLocal: string | undefined;
  const det = cfg.localDetector;
  const fromCIDRs = (cidrs: string[], what: string) => {
    if (cidrs.length === 0) {
      warnings.push(`no IPv${fam} ${what}: pod traffic cannot be told from other traffic`);
      return;
    }
    localMatches = cidrs.map((c) => `${ip} saddr ${c}`);
    notLocal = cidrs.map((c) => `${ip} saddr != ${c}`).join(" ");
  };
  switch (det.mode) {
    case "ClusterCIDR": {
      for (const c of det.cidrs) {
        if (!parseCIDR(c)) throw new Error(`localDetector cidr ${JSON.stringify(c)} is not a CIDR`);
      }
      fromCIDRs(det.cidrs.filter((c) => parseCIDR(c)!.family === fam), "cluster CIDR");
      break;
    }
    case "NodeCIDR":
      fromCIDRs(podCIDRs, "podCIDR on this node");
      break;
    case "BridgeInterface":
      if (!det.interface) throw new Error("localDetector BridgeInterface needs an interface name");
      localMatches = [`iifname "${det.interface}"`];
      notLocal = `iifname != "${det.interface}"`;
      break;
    case "InterfaceNamePrefix":
      if (!det.prefix) throw new Error("localDetector InterfaceNamePrefix needs a prefix");
      localMatches = [`iifname "${det.prefix}*"`];
      notLocal = `iifname != "${det.prefix}*"`;
      break;
    case "None":
      break;
    default:
      throw new Error(
        `unknown localDetector mode ${JSON.stringify((det as { mode: string }).mode)}`,
      );
  }

  const zone = state.node.labels[ZONE_LABEL];
  return {
    family: fam,
    ip,
    addrType: fam === 4 ? "ipv4_addr" : "ipv6_addr",
    node: {
      name: state.node.name,
      labels: zone === undefined ? {} : { [ZONE_LABEL]: zone },
      ips: nodeIPs,
      podCIDRs,
    },
    nodeIPs,
    nodePortIPs,
    serviceCIDRs: state.serviceCIDRs.filter((c) => parseCIDR(c)?.family === fam),
    masqMark: "0x" + (1 << bit >>> 0).toString(16).padStart(8, "0"),
    masqueradeAll: cfg.masqueradeAll,
    localMatches,
    notLocal,
    warnings,
  };
}

/** A string that changes exactly when the context changes in a way that affects rules. */
export function contextKey(ctx: BuildContext): string {
  const { warnings: _w, ...rest } = ctx;
  return JSON.stringify(rest);
}

function chain(name: string): Chain {
  return { kind: "chain", name };
}

function baseChain(
  name: string,
  type: "filter" | "nat",
  hook: Chain["hook"],
  priority: number,
): Chain {
  return { kind: "chain", name, type, hook, priority };
}

/** The static skeleton: base chains, dispatch chains, maps and sets, nodeport-ips elements. */
export function buildBase(ctx: BuildContext): Fragment {
  const ip = ctx.ip;
  const a = ctx.addrType;
  const mark = ctx.masqMark;
  const tuple = `${ip} daddr . meta l4proto . th dport`;
  const nodePortMatch = ctx.nodePortIPs === "all"
    ? `fib daddr type local ${ip} daddr != ${ip === "ip" ? "127.0.0.0/8" : "::1"}`
    : `${ip} daddr @${N.nodePortIPs}`;
  const chains: ChainSpec[] = [
    {
      chain: baseChain(N.filterPreroutingPreDnat, "filter", "prerouting", -110),
      rules: [`ct state new jump ${N.firewallCheck}`],
    },
    {
      chain: baseChain(N.filterOutputPreDnat, "filter", "output", -110),
      rules: [`ct state new jump ${N.firewallCheck}`],
    },
    {
      chain: baseChain(N.filterInput, "filter", "input", 0),
      rules: [
        `ct state new jump ${N.nodeportEndpointsCheck}`,
        `ct state new jump ${N.serviceEndpointsCheck}`,
      ],
    },
    {
      chain: baseChain(N.filterForward, "filter", "forward", 0),
      rules: [
        `ct state new jump ${N.serviceEndpointsCheck}`,
        `ct state new jump ${N.clusterIPsCheck}`,
      ],
    },
    {
      chain: baseChain(N.filterOutput, "filter", "output", 0),
      rules: [
        `ct state new jump ${N.serviceEndpointsCheck}`,
        `ct state new jump ${N.clusterIPsCheck}`,
      ],
    },
    {
      chain: baseChain(N.natPrerouting, "nat", "prerouting", -100),
      rules: [`jump ${N.services}`],
    },
    { chain: baseChain(N.natOutput, "nat", "output", -100), rules: [`jump ${N.services}`] },
    {
      chain: baseChain(N.natPostrouting, "nat", "postrouting", 100),
      rules: [`jump ${N.masquerading}`],
    },
    {
      chain: chain(N.services),
      rules: [
        `${tuple} vmap @${N.serviceIPs}`,
        `${nodePortMatch} meta l4proto . th dport vmap @${N.serviceNodePorts}`,
      ],
    },
    {
      chain: chain(N.serviceEndpointsCheck),
      rules: [`${tuple} vmap @${N.noEndpointServices}`],
    },
    {
      chain: chain(N.nodeportEndpointsCheck),
      rules: [`${nodePortMatch} meta l4proto . th dport vmap @${N.noEndpointNodePorts}`],
    },
    {
      chain: chain(N.clusterIPsCheck),
      rules: [
        `${ip} daddr @${N.clusterIPs} reject`,
        // One rule per CIDR: an inline `{ a, b }` would be an anonymous set.
        ...ctx.serviceCIDRs.map((c) => `${ip} daddr ${c} drop`),
      ],
    },
    { chain: chain(N.firewallCheck), rules: [`${tuple} vmap @${N.firewallIPs}`] },
    { chain: chain(N.rejectChain), rules: ["reject"] },
    {
      chain: chain(N.masquerading),
      rules: [
        // After DNAT a hairpinned packet has saddr == daddr == the endpoint.
        `ct status dnat ${ip} saddr . ${ip} daddr @${N.hairpin} masquerade fully-random`,
        `meta mark & ${mark} == 0 return`,
        `meta mark set meta mark xor ${mark}`,
        "masquerade fully-random",
      ],
    },
  ];
  const vmap = (name: string, type: string, comment: string): NftMap => ({
    kind: "map",
    name,
    type,
    dataType: "verdict",
    comment,
  });
  const sets: (NftSet | NftMap)[] = [
    vmap(
      N.serviceIPs,
      `${a} . inet_proto . inet_service`,
      "ClusterIP, ExternalIP and LoadBalancer IP traffic",
    ),
    vmap(N.serviceNodePorts, "inet_proto . inet_service", "NodePort traffic"),
    vmap(
      N.noEndpointServices,
      `${a} . inet_proto . inet_service`,
      "vmap to drop or reject packets to services with no endpoints",
    ),
    vmap(
      N.noEndpointNodePorts,
      "inet_proto . inet_service",
      "vmap to drop or reject packets to service nodeports with no endpoints",
    ),
    vmap(
      N.firewallIPs,
      `${a} . inet_proto . inet_service`,
      "destinations that are subject to LoadBalancerSourceRanges",
    ),
    { kind: "set", name: N.clusterIPs, type: a, comment: "Active ClusterIPs" },
    { kind: "set", name: N.nodePortIPs, type: a, comment: "IPs that accept NodePort traffic" },
    {
      kind: "set",
      name: N.hairpin,
      type: `${a} . ${a}`,
      comment: "endpoint . endpoint, for hairpin masquerade",
    },
  ];
  const elements: ElementSpec[] = ctx.nodePortIPs === "all"
    ? []
    : ctx.nodePortIPs.map((ip) => ({ target: N.nodePortIPs, key: [ip] }));
  return { chains, sets, elements };
}

/**
 * The rules choosing one endpoint: first sticky lookups when affinity is on,
 * then `numgen random mod (N-i) 0` for endpoint i (the last unconditional),
 * which picks each endpoint with probability 1/N.
 */
function selectionRules(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  ctx: BuildContext,
  affinity: readonly string[] | undefined,
): string[] {
  const ip = ctx.ip;
  const l4 = `meta l4proto ${svc.protocol.toLowerCase()}`;
  const dnat = (ep: EndpointInfo) =>
    ctx.family === 4 ? `dnat ip to ${ep.ip}:${ep.port}` : `dnat ip6 to [${ep.ip}]:${ep.port}`;
  const out: string[] = [];
  if (affinity) {
    eps.forEach((ep, i) => {
      const s = affinity[i];
      out.push(`${ip} saddr @${s} update @${s} { ${ip} saddr } ${l4} ${dnat(ep)}`);
    });
  }
  const n = eps.length;
  eps.forEach((ep, i) => {
    const upd = affinity ? ` update @${affinity[i]} { ${ip} saddr }` : "";
    const pick = i < n - 1 ? ` numgen random mod ${n - i} 0` : "";
    out.push(`${l4}${pick}${upd} ${dnat(ep)}`);
  });
  return out;
}

/**
 * Everything one service port contributes. Depends only on its arguments,
 * so the sync engine can rebuild one service in isolation.
 */
export function buildServicePort(
  svc: ServicePortInfo,
  endpoints: readonly EndpointInfo[],
  ctx: BuildContext,
): Fragment {
  if (svc.family !== ctx.family) {
    throw new Error(
      `service port ${svc.id} is IPv${svc.family} but the ruleset is IPv${ctx.family}`,
    );
  }
  const ip = ctx.ip;
  const id = svc.id;
  // nft refuses comments over 128 bytes; a full ns/name:port can reach 191.
  const comment = id.length > COMMENT_MAX ? id.slice(0, COMMENT_MAX - 3) + "..." : id;
  const proto = svc.protocol.toLowerCase();
  const port = String(svc.port);
  const names = serviceChainNames(svc);
  const cat = categorizeEndpoints(svc, endpoints, ctx.node);
  const chains: ChainSpec[] = [];
  const sets: NftSet[] = [];
  const elements: ElementSpec[] = [];
  const el = (target: string, key: string[], value?: string) =>
    elements.push(
      value === undefined ? { target, key, comment } : { target, key, value: [value], comment },
    );

  const external = externallyAccessible(svc);
  const clusterChain = usesClusterEndpoints(svc) && cat.clusterEndpoints.length > 0;
  const localChain = usesLocalEndpoints(svc) && cat.localEndpoints.length > 0;
  const hasInternal = svc.internalPolicyLocal ? localChain : clusterChain;
  const internalTarget = svc.internalPolicyLocal ? names.local : names.cluster;
  // Endpoints for traffic from outside the node to external destinations.
  const hasExternal = external && (svc.externalPolicyLocal ? localChain : clusterChain);
  // With eTP=Local and no local endpoints the external chain still exists to
  // send pod and host traffic to all endpoints; outside clients fall through
  // it un-NATed and meet the DROP in the no-endpoint maps.
  const externalChain = hasExternal ||
    (external && cat.hasAnyEndpoints && svc.externalPolicyLocal && clusterChain);
  // REJECT when nothing anywhere can serve; DROP when only the Local policy has none.
  const noEndpointVerdict = cat.hasAnyEndpoints ? "drop" : `goto ${N.rejectChain}`;

  // Affinity: one dynamic set per reachable endpoint.
  let affinityOf: Map<string, string> | undefined;
  if (svc.stickyMaxAgeSeconds > 0) {
    affinityOf = new Map();
    for (const ep of cat.allReachableEndpoints) {
      const k = `${ep.ip}|${ep.port}`;
      if (affinityOf.has(k)) continue;
      const name = affinitySetName(svc, ep.ip, ep.port);
      affinityOf.set(k, name);
      sets.push({
        kind: "set",
        name,
        type: ctx.addrType,
        flags: ["dynamic", "timeout"],
        timeout: svc.stickyMaxAgeSeconds,
      });
    }
  }
  const affFor = (eps: readonly EndpointInfo[]) =>
    affinityOf && eps.map((ep) => affinityOf!.get(`${ep.ip}|${ep.port}`)!);

  // Off-cluster traffic to the ClusterIP is masqueraded: its reply must come back through us.
  const masqRule = ctx.masqueradeAll
    ? `${ip} daddr ${svc.clusterIP} meta mark set meta mark or ${ctx.masqMark}`
    : ctx.notLocal === undefined
    ? undefined
    : `${ip} daddr ${svc.clusterIP} ${ctx.notLocal} meta mark set meta mark or ${ctx.masqMark}`;
  if (clusterChain) {
    const rules: string[] = [];
    if (masqRule && hasInternal && internalTarget === names.cluster) rules.push(masqRule);
    rules.push(...selectionRules(svc, cat.clusterEndpoints, ctx, affFor(cat.clusterEndpoints)));
    chains.push({ chain: chain(names.cluster), rules });
  }
  if (localChain) {
    const rules: string[] = [];
    if (masqRule && hasInternal && internalTarget === names.local) rules.push(masqRule);
    rules.push(...selectionRules(svc, cat.localEndpoints, ctx, affFor(cat.localEndpoints)));
    chains.push({ chain: chain(names.local), rules });
  }
  if (externalChain) {
    const rules: string[] = [];
    if (!svc.externalPolicyLocal) {
      rules.push(`meta mark set meta mark or ${ctx.masqMark}`, `goto ${names.cluster}`);
    } else {
      if (clusterChain) {
        // Pods and the host itself may use every endpoint: their source
        // address is not an outside client's anyway.
        for (const m of ctx.localMatches) rules.push(`${m} goto ${names.cluster}`);
        rules.push(
          `fib saddr type local meta mark set meta mark or ${ctx.masqMark}`,
          `fib saddr type local goto ${names.cluster}`,
        );
      }
      if (hasExternal) rules.push(`goto ${names.local}`);
    }
    chains.push({ chain: chain(names.external), rules });
  }

  // Dispatch elements.
  el(N.clusterIPs, [svc.clusterIP]);
  if (hasInternal) el(N.serviceIPs, [svc.clusterIP, proto, port], `goto ${internalTarget}`);
  else {
    el(N.noEndpointServices, [svc.clusterIP, proto, port], noEndpointVerdict);
  }
  for (const addr of [...svc.externalIPs, ...svc.loadBalancerIPs]) {
    if (externalChain) el(N.serviceIPs, [addr, proto, port], `goto ${names.external}`);
    if (!hasExternal) el(N.noEndpointServices, [addr, proto, port], noEndpointVerdict);
  }
  if (svc.nodePort > 0) {
    const key = [proto, String(svc.nodePort)];
    if (externalChain) el(N.serviceNodePorts, key, `goto ${names.external}`);
    if (!hasExternal) el(N.noEndpointNodePorts, key, noEndpointVerdict);
  }

  // loadBalancerSourceRanges.
  if (svc.loadBalancerIPs.length > 0 && svc.loadBalancerSourceRanges.length > 0) {
    const rules: string[] = [];
    let coversNode = false;
    for (const r of svc.loadBalancerSourceRanges) {
      const c = parseCIDR(r);
      if (!c || c.family !== ctx.family) {
        throw new Error(
          `service port ${id}: loadBalancerSourceRange ${
            JSON.stringify(r)
          } is not an IPv${ctx.family} CIDR`,
        );
      }
      rules.push(`${ip} saddr ${r} return`);
      if (ctx.nodeIPs.some((a) => cidrContains(c, parseIP(a)!))) coversNode = true;
    }
    // Traffic the node itself sends to the LB IP may carry the LB IP as source.
    if (coversNode) {
      for (const lb of svc.loadBalancerIPs) rules.push(`${ip} saddr ${lb} return`);
    }
    rules.push("drop");
    chains.push({ chain: chain(names.firewall), rules });
    for (const lb of svc.loadBalancerIPs) {
      el(N.firewallIPs, [lb, proto, port], `goto ${names.firewall}`);
    }
  }

  // Hairpin: a pod reaching itself through the service must be masqueraded.
  // Only pods on this node can: a remote pod's ClusterIP traffic is DNATed on
  // its own node, and external traffic here is masqueraded anyway. Keeping
  // remote endpoints out keeps the set (and a cold sync) small at scale; an
  // endpoint without a nodeName might be local, so it stays.
  const seen = new Set<string>();
  for (const ep of cat.allReachableEndpoints) {
    if (!ep.isLocal && ep.nodeName !== undefined) continue;
    if (seen.has(ep.ip)) continue;
    seen.add(ep.ip);
    el(N.hairpin, [ep.ip, ep.ip]);
  }
  return { chains, sets, elements };
}

/** Builds one family's whole ruleset. */
export function buildRuleset(state: ProxyState, cfg: ProxierConfig): BuiltRuleset {
  const ctx = buildContext(state, cfg);
  const services = new Map<string, Fragment>();
  for (const [id, svc] of state.services) {
    services.set(id, buildServicePort(svc, state.endpoints.get(id) ?? [], ctx));
  }
  return { family: ctx.ip, table: TABLE, base: buildBase(ctx), services };
}
