/**
 * What one service port wants in the table: its frontends (the destinations
 * clients use, each with where the dispatch maps send it), its ClusterIP in
 * `cluster-ips`, hairpin entries, and chains of its own where it needs them.
 * A pure function of the port, its endpoints and the build context, so a
 * partial sync can rebuild one service port in isolation.
 *
 * The common service port (no affinity, no externalTrafficPolicy Local)
 * gets no chain: each frontend is a verdict element pointing at a shared
 * class chain for its endpoint count, plus one bucket element per endpoint.
 *
 * @module
 */
import type { Set as NftSet } from "../../ffi/nftables/types.ts";
import {
  categorizeEndpoints,
  externallyAccessible,
  usesClusterEndpoints,
  usesLocalEndpoints,
} from "../categorize.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../model.ts";
import type { BuildContext } from "./context.ts";
import { BIG_FRONTEND, type ClassKind, type L4, serviceChainNames } from "./names.ts";
import { firewallChain, noEndpointVerdict, ownChains } from "./service_chains.ts";
import type { ChainSpec } from "./skeleton.ts";

/** Longest comment nft accepts. */
const COMMENT_MAX = 128;

/** The comment on a service port's elements: its id, cut to what nft accepts. */
export function elementComment(id: string): string {
  return id.length > COMMENT_MAX ? id.slice(0, COMMENT_MAX - 3) + "..." : id;
}

/** Where a frontend's traffic goes: a shared class chain with its endpoints, or a chain of its own. */
export type Dispatch =
  | { class: ClassKind; proto: L4; endpoints: string[] }
  | { chain: string };

/** One destination of a service port, as the dispatch maps see it. */
export interface FrontendSpec {
  /** `addr . proto . port`, or `proto . nodePort` for NodePorts (nft element key syntax). */
  key: string;
  /** True for a NodePort frontend. */
  nodePort: boolean;
  /** The verdict element in service-ips / service-nodeports, if any. */
  dispatch?: Dispatch;
  /** The no-endpoint-services / no-endpoint-nodeports verdict, if any. */
  noEndpoint?: string;
  /** firewall-ips target chain (loadBalancerSourceRanges), if any. */
  firewall?: string;
}

/** Everything one service port contributes to the table. */
export interface ServiceRules {
  /** The service port id (`ns/name:port`). */
  id: string;
  /** The element comment (the port id, shortened to what nft accepts). */
  comment: string;
  /** Its destinations, one per distinct key. */
  frontends: FrontendSpec[];
  /** For `cluster-ips`. */
  clusterIP: string;
  /** The comment on the `cluster-ips` element: the Service, which all its ports share. */
  clusterIPComment: string;
  /** Endpoint IPs that may hairpin on this node (for the `hairpin` set). */
  hairpin: string[];
  /** Chains of its own (affinity, eTP=Local, firewall); usually none. */
  chains: ChainSpec[];
  /** Affinity sets. */
  sets: NftSet[];
}

const NO_CHAINS: ChainSpec[] = [];
const NO_SETS: NftSet[] = [];

/** `ip . port`, as an element value of the endpoint maps. */
function endpointValue(ep: EndpointInfo): string {
  // join makes one flat string; a template would keep its parts until the frontend spec is
  // written (~80 bytes more per endpoint while a full sync holds every Service's rules).
  return [ep.ip, ep.port].join(" . ");
}

/**
 * Bucket values of big endpoint lists, by endpoint: a Service's unchanged slices keep their
 * endpoint objects, so a change to one slice of a 5000-endpoint Service builds the few new
 * strings only, and stableBuckets (frontend.ts) finds the rest already hashed. Small lists
 * build theirs (a cache entry per endpoint of every Service would cost more memory than it
 * saves time).
 */
const bucketValues = new WeakMap<EndpointInfo, string>();

function endpointValues(eps: readonly EndpointInfo[]): string[] {
  if (eps.length < BIG_FRONTEND) return eps.map(endpointValue);
  return eps.map((ep) => {
    let v = bucketValues.get(ep);
    if (v === undefined) bucketValues.set(ep, v = endpointValue(ep));
    return v;
  });
}

/** The rules of service port `id` as `state` has it now, or undefined when it has no such port. */
export function portRules(
  state: Pick<ProxyState, "services" | "endpoints">,
  id: string,
  ctx: BuildContext,
): ServiceRules | undefined {
  const svc = state.services.get(id);
  return svc === undefined ? undefined : buildServiceRules(svc, state.endpoints.get(id) ?? [], ctx);
}

/** Builds the rules of one service port. Throws on input no rule can express. */
export function buildServiceRules(
  svc: ServicePortInfo,
  endpoints: readonly EndpointInfo[],
  ctx: BuildContext,
): ServiceRules {
  if (svc.family !== ctx.family) {
    throw new Error(
      `service port ${svc.id} is IPv${svc.family} but the ruleset is IPv${ctx.family}`,
    );
  }
  const proto = svc.protocol.toLowerCase() as L4;
  const cat = categorizeEndpoints(svc, endpoints, ctx.node);
  const external = externallyAccessible(svc);
  const clusterChain = usesClusterEndpoints(svc) && cat.clusterEndpoints.length > 0;
  const localChain = usesLocalEndpoints(svc) && cat.localEndpoints.length > 0;
  const hasInternal = svc.internalPolicyLocal ? localChain : clusterChain;
  // Endpoints for traffic from outside the node to external destinations.
  const hasExternal = external && (svc.externalPolicyLocal ? localChain : clusterChain);
  const noEp = noEndpointVerdict(cat.hasAnyEndpoints);
  // Affinity keeps per-client state; eTP=Local branches on the source.
  const own = svc.stickyMaxAgeSeconds > 0 || (svc.externalPolicyLocal && external);
  const names = own || svc.loadBalancerSourceRanges.length > 0 ? serviceChainNames(svc) : undefined;

  let chains = NO_CHAINS;
  let sets = NO_SETS;
  let internal: Dispatch | undefined;
  let externalDispatch: Dispatch | undefined;
  let nodePortDispatch: Dispatch | undefined;
  if (own) {
    // With eTP=Local and no local endpoints external-X still sends pod and
    // host traffic to every endpoint.
    const externalChain = hasExternal ||
      (external && cat.hasAnyEndpoints && svc.externalPolicyLocal && clusterChain);
    const built = ownChains(svc, ctx, {
      names: names!,
      clusterEndpoints: cat.clusterEndpoints,
      localEndpoints: cat.localEndpoints,
      reachable: cat.allReachableEndpoints,
      clusterChain,
      localChain,
      externalChain,
      hasExternal,
    });
    chains = built.chains;
    sets = built.sets;
    if (hasInternal) {
      internal = { chain: svc.internalPolicyLocal ? names!.local : names!.cluster };
    }
    if (externalChain) externalDispatch = nodePortDispatch = { chain: names!.external };
  } else {
    if (hasInternal) {
      const eps = svc.internalPolicyLocal ? cat.localEndpoints : cat.clusterEndpoints;
      internal = { class: "dnat", proto, endpoints: endpointValues(eps) };
    }
    if (hasExternal) {
      const eps = endpointValues(cat.clusterEndpoints);
      externalDispatch = { class: "external", proto, endpoints: eps };
      nodePortDispatch = { class: "nodeport", proto, endpoints: eps };
    }
  }

  const firewall = svc.loadBalancerIPs.length > 0 && svc.loadBalancerSourceRanges.length > 0;
  const frontends = frontendsOf(svc, proto, {
    internal,
    external: externalDispatch,
    nodePort: nodePortDispatch,
    hasInternal,
    hasExternal,
    noEp,
    firewall: firewall ? names!.firewall : undefined,
  });
  if (firewall) chains = [...chains, firewallChain(svc, ctx, names!.firewall)];
  const hairpin = hairpinIPs(cat.allReachableEndpoints);
  return {
    id: svc.id,
    comment: elementComment(svc.id),
    frontends,
    clusterIP: svc.clusterIP,
    clusterIPComment: elementComment(`${svc.namespace}/${svc.name}`),
    hairpin,
    chains,
    sets,
  };
}

/** Where one service port's frontends dispatch, and what they do without endpoints. */
interface FrontendDispatch {
  internal: Dispatch | undefined;
  external: Dispatch | undefined;
  nodePort: Dispatch | undefined;
  hasInternal: boolean;
  hasExternal: boolean;
  noEp: ReturnType<typeof noEndpointVerdict>;
  /** The firewall chain of the LoadBalancer IPs, when loadBalancerSourceRanges apply. */
  firewall: string | undefined;
}

/** The frontends of a service port: ClusterIP, external IPs, LoadBalancer IPs, NodePort. */
function frontendsOf(svc: ServicePortInfo, proto: L4, d: FrontendDispatch): FrontendSpec[] {
  const frontends = new Map<string, FrontendSpec>();
  const add = (f: FrontendSpec) => {
    // The same address may be listed twice (an externalIP that is also an LB IP).
    const prev = frontends.get(f.key);
    frontends.set(f.key, prev?.firewall !== undefined && f.firewall === undefined ? prev : f);
  };
  const ipFrontend = (addr: string, dispatch: Dispatch | undefined, hasEps: boolean) => {
    const f: FrontendSpec = { key: `${addr} . ${proto} . ${svc.port}`, nodePort: false };
    if (dispatch !== undefined) f.dispatch = dispatch;
    if (!hasEps) f.noEndpoint = d.noEp;
    return f;
  };
  add(ipFrontend(svc.clusterIP, d.internal, d.hasInternal));
  for (const addr of svc.externalIPs) add(ipFrontend(addr, d.external, d.hasExternal));
  for (const addr of svc.loadBalancerIPs) {
    const f = ipFrontend(addr, d.external, d.hasExternal);
    if (d.firewall !== undefined) f.firewall = d.firewall;
    add(f);
  }
  if (svc.nodePort > 0) {
    const f: FrontendSpec = { key: `${proto} . ${svc.nodePort}`, nodePort: true };
    if (d.nodePort !== undefined) f.dispatch = d.nodePort;
    if (!d.hasExternal) f.noEndpoint = d.noEp;
    add(f);
  }
  return [...frontends.values()];
}

/**
 * Hairpin: a pod reaching itself through the service must be masqueraded. Only pods on this
 * node can: a remote pod's ClusterIP traffic is DNATed on its own node, and external traffic
 * here is masqueraded anyway. An endpoint without a nodeName might be local, so it stays.
 */
function hairpinIPs(endpoints: readonly EndpointInfo[]): string[] {
  const hairpin: string[] = [];
  for (const ep of endpoints) {
    if (!ep.isLocal && ep.nodeName !== undefined) continue;
    if (!hairpin.includes(ep.ip)) hairpin.push(ep.ip);
  }
  return hairpin;
}
