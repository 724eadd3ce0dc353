/**
 * The build context: everything besides services and endpoints that shapes
 * one family's rules (node addresses, NodePort addresses, local-traffic
 * detection, masquerade mark). When its {@link contextKey} changes, every
 * service port is rebuilt by a full sync.
 *
 * @module
 */
import { ZONE_LABEL } from "../categorize.ts";
import { parseCIDR } from "../../net/cidr.ts";
import { ipFamily, parseIP } from "../../net/ip.ts";
import {
  loopbackNodePorts,
  parseNodePortAddresses,
  selectNodePortIPs,
} from "../../net/nodeport_addresses.ts";
import type { NodeInfo, ProxierConfig, ProxyState } from "../model.ts";
import { type IpFamily, nftFamily } from "../../net/family.ts";

/**
 * Everything besides services and endpoints that shapes the rules. When it
 * changes (see {@link contextKey}) every service port must be rebuilt.
 */
export interface BuildContext {
  /** The table's IP family. */
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
  /** ServiceCIDRs of this family (unallocated ClusterIPs are dropped). */
  serviceCIDRs: string[];
  /** The masquerade mark, formatted as nft prints it (`0x00004000`). */
  masqMark: string;
  /** Masquerade all traffic to Service IPs (--masquerade-all). */
  masqueradeAll: boolean;
  /** Alternative matches that each mean "from a pod on this node"; [] when undetectable. */
  localMatches: string[];
  /** A match meaning "not from a pod on this node", or undefined when undetectable. */
  notLocal: string | undefined;
  /** The localhost NodePort proxy serves this family: UDP/SCTP to its loopback NodePorts are rejected. */
  localhostNodePorts: boolean;
  /** Problems worth logging (e.g. localhost nodePortAddresses). Not part of the key. */
  warnings: string[];
}

function isLoopback(ip: string): boolean {
  const p = parseIP(ip);
  if (!p) return false;
  return p.family === 4 ? p.bytes[0] === 127 : p.bytes.every((b, i) => b === (i === 15 ? 1 : 0));
}

/**
 * The NodePort addresses of family `fam` (net/nodeport_addresses.ts), without loopback ones:
 * the kernel cannot DNAT traffic to 127.0.0.1 or ::1 safely, so those never go into
 * nodeport-ips (a localhost NodePort is the userspace proxy's job).
 */
function nodePortSelection(
  entries: string[],
  fam: IpFamily,
  nodeIPs: string[],
  hostAddrs: readonly string[] | undefined,
  warnings: string[],
): string[] | "all" {
  let npa;
  try {
    npa = parseNodePortAddresses(entries);
  } catch (err) {
    throw new Error(`nodePortAddresses: ${(err as Error).message}`);
  }
  const given = entries.length === 0 ? ["primary"] : entries;
  const loop = loopbackNodePorts(npa)[fam === 4 ? "ipv4" : "ipv6"];
  if (loop) {
    warnings.push(
      `nodePortAddresses [${given.join(", ")}] selects ${fam === 4 ? "127.0.0.1" : "::1"}: ` +
        "the nftables rules do not serve NodePorts on loopback addresses; the localhost NodePort " +
        "proxy does while the KubeProxyNFTablesLocalhostNodePorts gate is on",
    );
  }
  const sel = selectNodePortIPs(npa, fam, nodeIPs, hostAddrs);
  if (sel === "all") return sel;
  const out = sel.filter((a) => {
    if (!isLoopback(a)) return true;
    if (!loop) warnings.push(`node IP ${a} is a loopback address; the rules skip it for NodePorts`);
    return false;
  });
  if (out.length === 0) {
    warnings.push(
      `no IPv${fam} address matches nodePortAddresses [${given.join(", ")}]: ` +
        `IPv${fam} NodePorts will not be reachable until one does`,
    );
  }
  return out;
}

/**
 * Derives the per-sync build context. Throws on configuration that cannot
 * be turned into rules, naming the bad value. `hostAddrs` are the addresses on this host's
 * interfaces, which nodePortAddresses CIDRs select from; without them CIDRs select among the
 * Node object's addresses.
 */
export function buildContext(
  state: ProxyState,
  cfg: ProxierConfig,
  hostAddrs?: readonly string[],
): BuildContext {
  const fam = state.family;
  if (fam !== 4 && fam !== 6) throw new Error(`ProxyState.family must be 4 or 6, got ${fam}`);
  const bit = cfg.masqueradeBit;
  if (!Number.isInteger(bit) || bit < 0 || bit > 31) {
    throw new Error(`masqueradeBit must be an integer 0-31, got ${bit}`);
  }
  const ip = nftFamily(fam);
  const warnings: string[] = [];
  const nodeIPs = state.node.ips.filter((a) => ipFamily(a) === fam);
  const podCIDRs = state.node.podCIDRs.filter((c) => parseCIDR(c)?.family === fam);

  const nodePortIPs = nodePortSelection(cfg.nodePortAddresses, fam, nodeIPs, hostAddrs, warnings);

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
    localhostNodePorts: cfg.localhostNodePorts?.includes(fam) ?? false,
    warnings,
  };
}

/**
 * Everything of `state` and `hostAddrs` that {@link buildContext} reads, as a string: equal
 * strings give equal contexts (for one config), so a sync can reuse the last one instead of
 * re-parsing the CIDRs and re-selecting NodePort addresses on every change.
 */
export function contextInputs(state: ProxyState, hostAddrs?: readonly string[]): string {
  const n = state.node;
  return [
    state.family,
    n.name,
    n.labels[ZONE_LABEL] ?? "",
    n.ips.join(","),
    n.podCIDRs.join(","),
    state.serviceCIDRs.join(","),
    hostAddrs === undefined ? "-" : hostAddrs.join(","),
  ].join("|");
}

/** A string that changes exactly when the context changes in a way that affects rules. */
export function contextKey(ctx: BuildContext): string {
  const { warnings: _w, ...rest } = ctx;
  return JSON.stringify(rest);
}
