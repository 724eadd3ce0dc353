/**
 * The static part of a family's table: base chains, dispatch chains, the
 * verdict maps they look up, the endpoint-bucket maps, and the shared
 * endpoint-selection ("class") chains. Pure functions of the build context.
 *
 * @module
 */
import type { Chain, Map as NftMap, Set as NftSet } from "../../ffi/nftables/types.ts";
import type { BuildContext } from "./context.ts";
import {
  classChainName,
  type ClassKind,
  classSetName,
  endpointsMapName,
  FIXED,
  type L4,
  L4S,
  parseClassChain,
  RESERVED_CLASS_MAX,
  usesLargeMap,
} from "./names.ts";
import { localhostChain, localhostJump } from "./localhost.ts";

/** A chain with its complete rule list (nft syntax bodies). */
export interface ChainSpec {
  /** The chain. */
  chain: Chain;
  /** Its rules, in order. */
  rules: string[];
  /** Named counters the rules update; created (if missing) before the rules are written. */
  counters?: string[];
}

/** The skeleton of one family's table. */
export interface Skeleton {
  /** The fixed chains with their rules. */
  chains: ChainSpec[];
  /** The fixed sets and maps. */
  sets: (NftSet | NftMap)[];
  /** `nodeport-ips` elements (the node addresses that accept NodePort traffic). */
  nodePortIPs: string[];
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

/** `meta mark set meta mark | MASK`, as the kernel lists it back. */
export function markForMasquerade(ctx: BuildContext): string {
  return `meta mark set meta mark | ${ctx.masqMark}`;
}

/**
 * The rule that marks ClusterIP traffic not coming from a local pod for
 * masquerade, so replies come back through this node; undefined when pod
 * traffic cannot be recognised (and masqueradeAll is off). Marking packets
 * that end up not DNATed is harmless: those are rejected or dropped by the
 * filter chains before postrouting.
 */
function clusterMasqueradeRule(ctx: BuildContext): string | undefined {
  const to = `${ctx.ip} daddr @${FIXED.clusterIPs}`;
  if (ctx.masqueradeAll) return `${to} ${markForMasquerade(ctx)}`;
  if (ctx.notLocal === undefined) return undefined;
  return `${to} ${ctx.notLocal} ${markForMasquerade(ctx)}`;
}

/**
 * The maps holding endpoint buckets of generation `gen`: key = frontend
 * (destination, protocol, port; NodePorts without the destination) plus the
 * bucket number a `numgen random mod N` produces, value = endpoint address
 * and port. One map per protocol serves every endpoint count: the class
 * chain's modulus decides which buckets exist.
 *
 * Why per protocol: the value's port needs a protocol, and its typeof names
 * one (`udp dport`), so nft puts the matching `meta l4proto` check in every
 * rule using the map. With a protocol-less `th dport`, nft 1.0.6 refuses any
 * rule that uses a map it read back from the kernel ("conflicting protocols
 * specified: ip vs. th"), that is every class chain added after the map.
 */
export function endpointMaps(ctx: BuildContext, gen: number): NftMap[] {
  const ip = ctx.ip;
  return L4S.flatMap((proto) =>
    [false, true].flatMap((large): NftMap[] => {
      // Short comments: with the typeof keys, one of ~85 bytes overruns libnftables 1.0.6's
      // userdata buffer (an error, or a heap corruption that aborts the process).
      const big = ` of over ${RESERVED_CLASS_MAX} endpoints`;
      return [
        {
          kind: "map",
          name: endpointsMapName(false, proto, gen, large),
          type: `typeof ${ip} daddr . meta l4proto . th dport . numgen random mod 1`,
          dataType: `${ip} daddr . ${proto} dport`,
          comment: large
            ? `endpoint buckets of ${proto} ClusterIP/external frontends${big}`
            : `endpoint buckets of ${proto} ClusterIP, ExternalIP and LoadBalancer IP frontends`,
        },
        {
          kind: "map",
          name: endpointsMapName(true, proto, gen, large),
          type: "typeof meta l4proto . th dport . numgen random mod 1",
          dataType: `${ip} daddr . ${proto} dport`,
          comment: `endpoint buckets of ${proto} NodePort frontends${large ? big : ""}`,
        },
      ];
    })
  );
}

/**
 * A shared endpoint-selection chain: DNAT to one of `n` buckets of the
 * frontend the packet was sent to. External and NodePort traffic is marked
 * for masquerade first (externalTrafficPolicy Cluster).
 */
export function classChain(
  ctx: BuildContext,
  kind: ClassKind,
  proto: L4,
  n: number,
  gen: number,
): ChainSpec {
  const ip = ctx.ip;
  const pick = `numgen random mod ${n}`;
  const rules: string[] = [];
  if (kind !== "dnat") rules.push(markForMasquerade(ctx));
  const map = (nodePort: boolean) => endpointsMapName(nodePort, proto, gen, usesLargeMap(n));
  if (kind === "nodeport") {
    rules.push(`dnat ${ip} to meta l4proto . th dport . ${pick} map @${map(true)}`);
  } else {
    rules.push(`dnat ${ip} to ${ip} daddr . meta l4proto . th dport . ${pick} map @${map(false)}`);
  }
  return { chain: chain(classChainName(kind, proto, n, gen)), rules };
}

/** The set of the frontends class chain `chain` serves (keyed like the dispatch maps). */
export function classSet(ctx: BuildContext, chain: string): NftSet {
  const nodePort = parseClassChain(chain)?.kind === "nodeport";
  return {
    kind: "set",
    name: classSetName(chain),
    type: nodePort ? "inet_proto . inet_service" : `${ctx.addrType} . inet_proto . inet_service`,
    comment: `frontends served by ${chain}`,
  };
}

/**
 * The chains whose rules follow the class chains in use (`classes`): one rule per class in
 * `service-classes` (ClusterIP and external) or `nodeport-dispatch` (after its verdict map), a
 * set lookup and a goto, fewest endpoints first (the commonest); and, with localhost NodePorts, the loopback check,
 * which rejects UDP and SCTP to every NodePort, those of class sets included.
 */
export function classDispatchChains(ctx: BuildContext, classes: Iterable<string>): ChainSpec[] {
  const parsed = [...classes].map((name) => ({ name, ...parseClassChain(name)! }))
    .sort((a, b) => a.n - b.n || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const tuple = `${ctx.ip} daddr . meta l4proto . th dport`;
  const rule = (c: { name: string }, key: string) =>
    `${key} @${classSetName(c.name)} goto ${c.name}`;
  const nodePort = parsed.filter((c) => c.kind === "nodeport");
  const out: ChainSpec[] = [
    {
      chain: chain(FIXED.serviceClasses),
      rules: parsed.filter((c) => c.kind !== "nodeport").map((c) => rule(c, tuple)),
    },
    {
      chain: chain(FIXED.nodePortDispatch),
      rules: [
        `meta l4proto . th dport vmap @${FIXED.serviceNodePorts}`,
        ...nodePort.map((c) => rule(c, "meta l4proto . th dport")),
      ],
    },
  ];
  if (ctx.localhostNodePorts) {
    out.push(localhostChain(nodePort.map((c) => ({ proto: c.proto, set: classSetName(c.name) }))));
  }
  return out;
}

/** Class chains whose dispatch rule exists: present (live or stale) with their set live. */
export function dispatchedClasses(
  chains: Iterable<string>,
  hasSet: (name: string) => boolean,
): string[] {
  const out: string[] = [];
  for (const name of chains) {
    if (parseClassChain(name) !== undefined && hasSet(classSetName(name))) out.push(name);
  }
  return out;
}

/** The skeleton for `ctx`, with the endpoint maps of generation `gen`. */
export function buildSkeleton(ctx: BuildContext, gen: number): Skeleton {
  return {
    chains: skeletonChains(ctx),
    sets: skeletonSets(ctx, gen),
    nodePortIPs: ctx.nodePortIPs === "all" ? [] : [...ctx.nodePortIPs],
  };
}

/** The fixed chains: base chains in upstream's order and priorities, then the regular ones. */
function skeletonChains(ctx: BuildContext): ChainSpec[] {
  return [...baseChains(ctx), ...regularChains(ctx)];
}

/** The base chains: the filter hooks before and after DNAT, and the nat hooks. */
function baseChains(ctx: BuildContext): ChainSpec[] {
  return [
    {
      chain: baseChain(FIXED.filterPreroutingPreDnat, "filter", "prerouting", -110),
      rules: [`ct state new jump ${FIXED.firewallCheck}`],
    },
    {
      chain: baseChain(FIXED.filterOutputPreDnat, "filter", "output", -110),
      rules: [`ct state new jump ${FIXED.firewallCheck}`],
    },
    {
      chain: baseChain(FIXED.filterInput, "filter", "input", 0),
      rules: [
        `ct state new jump ${FIXED.nodeportEndpointsCheck}`,
        `ct state new jump ${FIXED.serviceEndpointsCheck}`,
      ],
    },
    {
      chain: baseChain(FIXED.filterForward, "filter", "forward", 0),
      rules: [
        `ct state new jump ${FIXED.serviceEndpointsCheck}`,
        `ct state new jump ${FIXED.clusterIPsCheck}`,
      ],
    },
    {
      chain: baseChain(FIXED.filterOutput, "filter", "output", 0),
      rules: [
        `ct state new jump ${FIXED.serviceEndpointsCheck}`,
        `ct state new jump ${FIXED.clusterIPsCheck}`,
      ],
    },
    {
      chain: baseChain(FIXED.natPrerouting, "nat", "prerouting", -100),
      rules: [`jump ${FIXED.services}`],
    },
    {
      chain: baseChain(FIXED.natOutput, "nat", "output", -100),
      rules: [...(ctx.localhostNodePorts ? [localhostJump(ctx)] : []), `jump ${FIXED.services}`],
    },
    {
      chain: baseChain(FIXED.natPostrouting, "nat", "postrouting", 100),
      rules: [`jump ${FIXED.masquerading}`],
    },
  ];
}

/**
 * The regular chains the base chains jump to: dispatch, checks, reject and masquerade (the
 * class dispatch and localhost chains follow the classes in use: {@link classDispatchChains}).
 */
function regularChains(ctx: BuildContext): ChainSpec[] {
  const ip = ctx.ip;
  const tuple = `${ip} daddr . meta l4proto . th dport`;
  const nodePortMatch = ctx.nodePortIPs === "all"
    ? `fib daddr type local ${ip} daddr != ${ip === "ip" ? "127.0.0.0/8" : "::1"}`
    : `${ip} daddr @${FIXED.nodePortIPs}`;
  const masq = clusterMasqueradeRule(ctx);
  return [
    {
      chain: chain(FIXED.services),
      rules: [
        ...(masq === undefined ? [] : [masq]),
        `${tuple} vmap @${FIXED.serviceIPs}`,
        `jump ${FIXED.serviceClasses}`,
        `${nodePortMatch} jump ${FIXED.nodePortDispatch}`,
      ],
    },
    {
      chain: chain(FIXED.serviceEndpointsCheck),
      rules: [`${tuple} vmap @${FIXED.noEndpointServices}`],
    },
    {
      chain: chain(FIXED.nodeportEndpointsCheck),
      rules: [`${nodePortMatch} meta l4proto . th dport vmap @${FIXED.noEndpointNodePorts}`],
    },
    {
      chain: chain(FIXED.clusterIPsCheck),
      rules: [
        `${ip} daddr @${FIXED.clusterIPs} reject`,
        // One rule per CIDR: an inline `{ a, b }` would be an anonymous set.
        ...ctx.serviceCIDRs.map((c) => `${ip} daddr ${c} drop`),
      ],
    },
    { chain: chain(FIXED.firewallCheck), rules: [`${tuple} vmap @${FIXED.firewallIPs}`] },
    { chain: chain(FIXED.rejectChain), rules: ["reject"] },
    {
      chain: chain(FIXED.masquerading),
      rules: [
        // After DNAT a hairpinned packet has saddr == daddr == the endpoint.
        `ct status dnat ${ip} saddr . ${ip} daddr @${FIXED.hairpin} masquerade fully-random`,
        `meta mark & ${ctx.masqMark} == 0 return`,
        `meta mark set meta mark ^ ${ctx.masqMark}`,
        "masquerade fully-random",
      ],
    },
  ];
}

/** The fixed sets and the dispatch verdict maps, then this generation's endpoint maps. */
function skeletonSets(ctx: BuildContext, gen: number): (NftSet | NftMap)[] {
  const a = ctx.addrType;
  const vmap = (name: string, type: string, comment: string): NftMap => ({
    kind: "map",
    name,
    type,
    dataType: "verdict",
    comment,
  });
  return [
    vmap(
      FIXED.serviceIPs,
      `${a} . inet_proto . inet_service`,
      "ClusterIP, ExternalIP and LoadBalancer IP traffic",
    ),
    vmap(FIXED.serviceNodePorts, "inet_proto . inet_service", "NodePort traffic"),
    vmap(
      FIXED.noEndpointServices,
      `${a} . inet_proto . inet_service`,
      "vmap to drop or reject packets to services with no endpoints",
    ),
    vmap(
      FIXED.noEndpointNodePorts,
      "inet_proto . inet_service",
      "vmap to drop or reject packets to service nodeports with no endpoints",
    ),
    vmap(
      FIXED.firewallIPs,
      `${a} . inet_proto . inet_service`,
      "destinations that are subject to LoadBalancerSourceRanges",
    ),
    { kind: "set", name: FIXED.clusterIPs, type: a, comment: "Active ClusterIPs" },
    { kind: "set", name: FIXED.nodePortIPs, type: a, comment: "IPs that accept NodePort traffic" },
    {
      kind: "set",
      name: FIXED.hairpin,
      type: `${a} . ${a}`,
      comment: "endpoint . endpoint, for hairpin masquerade",
    },
    ...endpointMaps(ctx, gen),
  ];
}
