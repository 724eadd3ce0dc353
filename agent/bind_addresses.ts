/**
 * v1alpha2's server addresses (`healthzBindAddresses`, `metricsBindAddresses`: CIDRs plus a port)
 * -> the "host:port" listeners to open: every local IP inside one of the CIDRs, and a /0 CIDR as
 * its family's wildcard address. Both wildcards become one `[::]` listener, which Linux serves to
 * IPv4 too (net.ipv6.bindv6only=0, the default); a node without IPv6 gets `0.0.0.0` instead.
 *
 * @module
 */
import type { BindCIDRs } from "./flags/types.ts";
import { isIPv4, isIPv6, normalizeHostPort } from "./flags/values.ts";

/** An IP as a 32- or 128-bit number, with its family. */
function ipBits(ip: string): { v6: boolean; n: bigint } | undefined {
  if (isIPv4(ip)) {
    return { v6: false, n: ip.split(".").reduce((a, o) => (a << 8n) | BigInt(o), 0n) };
  }
  if (!isIPv6(ip)) return undefined;
  let s = ip;
  const dotted = s.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (dotted) {
    const v4 = ipBits(dotted[1])!.n;
    s = s.slice(0, -dotted[1].length) +
      `${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, tail] = s.split("::");
  const hs = head ? head.split(":") : [];
  const ts = tail !== undefined ? (tail ? tail.split(":") : []) : [];
  const groups = tail !== undefined
    ? [...hs, ...Array(8 - hs.length - ts.length).fill("0"), ...ts]
    : hs;
  return { v6: true, n: groups.reduce((a, g) => (a << 16n) | BigInt(parseInt(g, 16)), 0n) };
}

/** True when `ip` is inside `cidr` (same family only). */
export function cidrContains(cidr: string, ip: string): boolean {
  const slash = cidr.indexOf("/");
  const net = ipBits(cidr.slice(0, slash)), addr = ipBits(ip);
  if (!net || !addr || net.v6 !== addr.v6) return false;
  const width = net.v6 ? 128n : 32n;
  const shift = width - BigInt(cidr.slice(slash + 1));
  return (net.n >> shift) === (addr.n >> shift);
}

/** The listeners for `b` given the node's local IPs (and whether IPv6 is usable at all). */
export function bindAddressesFor(b: BindCIDRs, localIPs: string[], ipv6 = true): string[] {
  const wild4 = b.cidrs.some((c) => c.includes(".") && c.endsWith("/0"));
  const wild6 = ipv6 && b.cidrs.some((c) => c.includes(":") && c.endsWith("/0"));
  const hostPort = (h: string) => normalizeHostPort(h.includes(":") ? `[${h}]` : h, b.port);
  // A dual-stack [::] listener takes the port for every address: nothing else may bind it.
  if (wild6) return [hostPort("::")];
  const hosts = new Set<string>(wild4 ? ["0.0.0.0"] : []);
  for (const ip of localIPs) {
    const v6 = ip.includes(":");
    if (v6 ? !ipv6 : wild4) continue;
    if (b.cidrs.some((c) => !c.endsWith("/0") && cidrContains(c, ip))) hosts.add(ip);
  }
  return [...hosts].map(hostPort);
}

/** This host's IPs (every interface, link-local IPv6 left out: it needs a zone to bind). */
export function localIPs(): string[] {
  return Deno.networkInterfaces()
    .map((i) => i.address)
    .filter((a) => !a.toLowerCase().startsWith("fe80:"));
}
