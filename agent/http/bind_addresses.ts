/**
 * v1alpha2's server addresses (`healthzBindAddresses`, `metricsBindAddresses`: CIDRs plus a port)
 * -> the "host:port" listeners to open: every local IP inside one of the CIDRs, and a /0 CIDR as
 * its family's wildcard address. Both wildcards become one `[::]` listener, which Linux serves to
 * IPv4 too (net.ipv6.bindv6only=0, the default); a node without IPv6 gets `0.0.0.0` instead.
 *
 * @module
 */
import type { BindCIDRs } from "../flags/types.ts";
import { cidrContains as contains, parseCIDR } from "../../net/cidr.ts";
import { parseIP } from "../../net/ip.ts";
import { normalizeHostPort } from "../flags/values.ts";

/** True when `ip` is inside `cidr` (same family only). */
export function cidrContains(cidr: string, ip: string): boolean {
  const net = parseCIDR(cidr), addr = parseIP(ip);
  return net !== null && addr !== null && contains(net, addr);
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
