/**
 * Chains of their own, for the few service ports whose handling really is
 * per service: ClientIP session affinity (per-client state), the
 * externalTrafficPolicy=Local split of external traffic (pods and the node
 * may use every endpoint, outside clients only local ones), and
 * loadBalancerSourceRanges. Everything else is map elements (service_rules.ts).
 *
 * @module
 */
import type { Set as NftSet } from "../../ffi/nftables/types.ts";
import { cidrContains, parseCIDR } from "../../net/cidr.ts";
import { parseIP } from "../../net/ip.ts";
import type { EndpointInfo, ServicePortInfo } from "../model.ts";
import type { BuildContext } from "./context.ts";
import { affinitySetName, FIXED, type ServiceChainNames } from "./names.ts";
import { type ChainSpec, markForMasquerade } from "./skeleton.ts";

/** `dnat ip to A:P` / `dnat ip6 to [A]:P`. */
function dnatTo(ctx: BuildContext, ep: EndpointInfo): string {
  return ctx.family === 4 ? `dnat ip to ${ep.ip}:${ep.port}` : `dnat ip6 to [${ep.ip}]:${ep.port}`;
}

/**
 * The rules choosing one endpoint in a service's own chain: sticky lookups
 * first when affinity is on, then `numgen random mod (N-i) 0` for endpoint i
 * (the last unconditional), which picks each endpoint with probability 1/FIXED.
 */
function selectionRules(
  svc: ServicePortInfo,
  eps: readonly EndpointInfo[],
  ctx: BuildContext,
  affinity: readonly string[] | undefined,
): string[] {
  const ip = ctx.ip;
  const l4 = `meta l4proto ${svc.protocol.toLowerCase()}`;
  const out: string[] = [];
  if (affinity) {
    eps.forEach((ep, i) => {
      const s = affinity[i];
      out.push(`${ip} saddr @${s} update @${s} { ${ip} saddr } ${l4} ${dnatTo(ctx, ep)}`);
    });
  }
  const n = eps.length;
  eps.forEach((ep, i) => {
    const upd = affinity ? ` update @${affinity[i]} { ${ip} saddr }` : "";
    const pick = i < n - 1 ? ` numgen random mod ${n - i} 0` : "";
    out.push(`${l4}${pick}${upd} ${dnatTo(ctx, ep)}`);
  });
  return out;
}

/** What the chains of one service port need to know about its endpoints. */
export interface ChainInputs {
  /** The chain names of this service port. */
  names: ServiceChainNames;
  /** Endpoints for cluster-wide traffic. */
  clusterEndpoints: readonly EndpointInfo[];
  /** Endpoints on this node (traffic policy Local). */
  localEndpoints: readonly EndpointInfo[];
  /** Every endpoint some traffic may reach (affinity sets). */
  reachable: readonly EndpointInfo[];
  /** Build service-X / local-X. */
  clusterChain: boolean;
  /** Build local-X. */
  localChain: boolean;
  /** Build external-X. */
  externalChain: boolean;
  /** Outside clients have endpoints (goto local-X under eTP=Local). */
  hasExternal: boolean;
}

/**
 * The chains (and affinity sets) of a service port that needs its own:
 * service-X (cluster endpoints), local-X (local endpoints), external-X.
 */
export function ownChains(
  svc: ServicePortInfo,
  ctx: BuildContext,
  c: ChainInputs,
): { chains: ChainSpec[]; sets: NftSet[] } {
  const chains: ChainSpec[] = [];
  const sets: NftSet[] = [];
  let affinityOf: Map<string, string> | undefined;
  if (svc.stickyMaxAgeSeconds > 0) {
    // One dynamic set per reachable endpoint, holding the clients stuck to it.
    affinityOf = new Map();
    for (const ep of c.reachable) {
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
  const { names } = c;
  if (c.clusterChain) {
    chains.push({
      chain: { kind: "chain", name: names.cluster },
      rules: selectionRules(svc, c.clusterEndpoints, ctx, affFor(c.clusterEndpoints)),
    });
  }
  if (c.localChain) {
    chains.push({
      chain: { kind: "chain", name: names.local },
      rules: selectionRules(svc, c.localEndpoints, ctx, affFor(c.localEndpoints)),
    });
  }
  if (c.externalChain) {
    const rules: string[] = [];
    if (!svc.externalPolicyLocal) {
      rules.push(markForMasquerade(ctx), `goto ${names.cluster}`);
    } else {
      if (c.clusterChain) {
        // Pods and the node itself may use every endpoint: their source
        // address is not an outside client's anyway.
        for (const m of ctx.localMatches) rules.push(`${m} goto ${names.cluster}`);
        rules.push(
          `fib saddr type local ${markForMasquerade(ctx)}`,
          `fib saddr type local goto ${names.cluster}`,
        );
      }
      // Without local endpoints outside clients fall through un-NATed and
      // meet the drop element in the no-endpoint maps.
      if (c.hasExternal) rules.push(`goto ${names.local}`);
    }
    chains.push({ chain: { kind: "chain", name: names.external }, rules });
  }
  return { chains, sets };
}

/**
 * firewall-X for loadBalancerSourceRanges: allowed ranges return, the rest
 * is dropped. When a range holds a node IP, the node reaching its own LB IP
 * may carry the LB IP as source, so that is allowed too.
 */
export function firewallChain(svc: ServicePortInfo, ctx: BuildContext, name: string): ChainSpec {
  const ip = ctx.ip;
  const rules: string[] = [];
  let coversNode = false;
  for (const r of svc.loadBalancerSourceRanges) {
    const c = parseCIDR(r);
    if (!c || c.family !== ctx.family) {
      throw new Error(
        `service port ${svc.id}: loadBalancerSourceRange ${
          JSON.stringify(r)
        } is not an IPv${ctx.family} CIDR`,
      );
    }
    rules.push(`${ip} saddr ${r} return`);
    if (ctx.nodeIPs.some((a) => cidrContains(c, parseIP(a)!))) coversNode = true;
  }
  if (coversNode) {
    for (const lb of svc.loadBalancerIPs) rules.push(`${ip} saddr ${lb} return`);
  }
  rules.push("drop");
  return { chain: { kind: "chain", name }, rules };
}

/** The verdict for a frontend without endpoints: REJECT when none exist anywhere, else DROP. */
export function noEndpointVerdict(hasAnyEndpoints: boolean): string {
  return hasAnyEndpoints ? "drop" : `goto ${FIXED.rejectChain}`;
}
