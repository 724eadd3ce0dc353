/**
 * `nodePortAddresses` / `--nodeport-addresses` (kube-proxy 1.37): CIDRs mixed with the keywords
 * `primary`, `localhost` and `all`. Parsing and validation ({@link parseNodePortAddresses},
 * {@link nodePortAddressErrors}), the addresses one family's NodePorts answer on
 * ({@link selectNodePortIPs}), and which loopback addresses the setting names
 * ({@link loopbackNodePorts}, for the localhost NodePort proxy). Pure.
 *
 * Upstream's sources in our reference store predate 1.37: there, the list is CIDRs or a lone
 * `primary` (pkg/proxy/apis/config/validation: "must be a valid CIDR", "can't use both 'primary'
 * and CIDRs"). The keywords, their mixing and `all` alone follow kubernetes PR #138427 and
 * KEP-6032 as issue 20 summarises them; the wording of the two errors for bad entries is ours,
 * in upstream's field-error shape.
 *
 * @module
 */
import { cidrContains, parseCIDR, type ParsedCIDR } from "./cidr.ts";
import type { IpFamily } from "./family.ts";
import { canonicalIP, parseIP } from "./ip.ts";

/** The keyword for the node's primary IP of each family (from the Node object). */
export const NPA_PRIMARY = "primary";
/** The keyword for the node's loopback addresses (127.0.0.1 and ::1). */
export const NPA_LOCALHOST = "localhost";
/** The keyword for every local address; it must stand alone. */
export const NPA_ALL = "all";
const KEYWORDS: readonly string[] = [NPA_PRIMARY, NPA_LOCALHOST, NPA_ALL];

/** A parsed, valid nodePortAddresses setting. */
export interface NodePortAddresses {
  /** `primary` given (or the list was empty: nftables mode's default). */
  primary: boolean;
  /** `localhost` given. */
  localhost: boolean;
  /** `all` given (then nothing else is). */
  all: boolean;
  /** The CIDRs given, host bits cleared. */
  cidrs: ParsedCIDR[];
}

/**
 * Upstream-shaped field errors for a nodePortAddresses list, one per bad entry; [] when valid.
 * An entry is a CIDR (read as ParseCIDRSloppy) or a keyword; `all` must be the only entry.
 */
export function nodePortAddressErrors(items: readonly string[]): string[] {
  const errs: string[] = [];
  items.forEach((s, i) => {
    const at = `NodePortAddresses[${i}]: Invalid value: ${JSON.stringify(s)}: `;
    if (!KEYWORDS.includes(s) && parseCIDR(s) === null) {
      errs.push(at + "must be a valid CIDR or one of 'primary', 'localhost', 'all'");
    } else if (s === NPA_ALL && items.length > 1) {
      errs.push(at + "'all' can't be combined with other values");
    }
  });
  return errs;
}

/**
 * Parses a nodePortAddresses list; an empty list means `primary` (kube-proxy's nftables-mode
 * default).
 *
 * @throws Error listing every {@link nodePortAddressErrors} finding, joined by "; ".
 */
export function parseNodePortAddresses(items: readonly string[]): NodePortAddresses {
  const errs = nodePortAddressErrors(items);
  if (errs.length > 0) throw new Error(errs.join("; "));
  const list = items.length === 0 ? [NPA_PRIMARY] : items;
  const cidrs = list.filter((s) => !KEYWORDS.includes(s)).map((s) => parseCIDR(s)!);
  return {
    primary: list.includes(NPA_PRIMARY),
    localhost: list.includes(NPA_LOCALHOST),
    all: list.includes(NPA_ALL),
    cidrs,
  };
}

const LOOPBACK: Record<IpFamily, string> = { 4: "127.0.0.1", 6: "::1" };

/** Whether `npa` accepts NodePorts on every local address of `family`. */
export function matchesAll(
  npa: NodePortAddresses,
  family: IpFamily,
  primaryIPs: string[],
): boolean {
  if (npa.all) return true;
  const own = npa.cidrs.filter((c) => c.family === family);
  if (own.some((c) => c.prefix === 0)) return true;
  // Upstream turns `primary` into one /32 or /128 per family with a node IP, then gives a family
  // with no entry at all the zero CIDR (pkg/proxy/util/nodeport_addresses.go).
  const hasPrimary = npa.primary && primaryIPs.some((a) => parseIP(a)?.family === family);
  return own.length === 0 && !hasPrimary && !npa.localhost;
}

/**
 * The addresses of `family` that accept NodePort traffic under `npa`, or "all" (every local
 * address: nftables' `fib daddr type local`). `primary` contributes `primaryIPs` (the Node
 * object's addresses); each CIDR selects the `hostAddrs` it contains: the addresses on this
 * host's interfaces, as upstream matches them. Without `hostAddrs` (no kernel: dry runs, the
 * tracer, unit tests) CIDRs select among `primaryIPs`. Loopback addresses are included when
 * selected; the caller decides what rules they get. Sorted, canonical, no duplicates.
 */
export function selectNodePortIPs(
  npa: NodePortAddresses,
  family: IpFamily,
  primaryIPs: string[],
  hostAddrs?: readonly string[],
): string[] | "all" {
  if (matchesAll(npa, family, primaryIPs)) return "all";
  const out = new Set<string>();
  const ofFamily = (list: readonly string[]) =>
    list.map((a) => canonicalIP(a)).filter((a): a is string =>
      a !== null && parseIP(a)!.family === family
    );
  if (npa.primary) { for (const a of ofFamily(primaryIPs)) out.add(a); }
  if (npa.localhost) out.add(LOOPBACK[family]);
  const candidates = ofFamily(hostAddrs ?? primaryIPs);
  for (const c of npa.cidrs) {
    if (c.family !== family) continue;
    for (const a of candidates) if (cidrContains(c, parseIP(a)!)) out.add(a);
  }
  return [...out].sort();
}

/** Which loopback addresses a nodePortAddresses setting selects for NodePorts. */
export interface LoopbackNodePorts {
  /** 127.0.0.1 is selected. */
  ipv4: boolean;
  /** ::1 is selected. */
  ipv6: boolean;
}

/**
 * Whether `npa` selects 127.0.0.1 and/or ::1 for NodePorts: the `localhost` keyword selects
 * both; a CIDR selects the one it contains (127.0.0.1/32, 127.0.0.0/8, ::1/128; 127.0.0.2/32
 * does not, kubernetes issue 142129). A family whose NodePorts match every address (`all`, a
 * zero CIDR, or no entry of that family, upstream's default) does not count: upstream runs its
 * localhost NodePort proxy only when the setting does not match all IPs (KEP-6032). Pure; for
 * the localhost NodePort listeners.
 */
export function loopbackNodePorts(npa: NodePortAddresses): LoopbackNodePorts {
  // `localhost` or a loopback CIDR is an entry of its family, so upstream's "no entry: all"
  // default cannot apply; only `all` and a zero CIDR make the family match everything.
  const selects = (family: IpFamily): boolean =>
    !npa.all && !npa.cidrs.some((c) => c.family === family && c.prefix === 0) &&
    (npa.localhost || containsLoopback(npa, family));
  return { ipv4: selects(4), ipv6: selects(6) };
}

function containsLoopback(npa: NodePortAddresses, family: IpFamily): boolean {
  const lo = parseIP(LOOPBACK[family])!;
  return npa.cidrs.some((c) => c.family === family && cidrContains(c, lo));
}
