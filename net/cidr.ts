/**
 * CIDRs: parsing (host bits cleared), canonical text and containment. Addresses are read as
 * in ip.ts: k8s.io/utils/net `ParseCIDRSloppy` by default, Go's `net.ParseCIDR` with `strict`.
 *
 * @module
 */

import type { IpFamily } from "./family.ts";
import { formatIP, type ParsedIP, parseIP } from "./ip.ts";

/** A parsed CIDR; `bytes` is the network address (host bits cleared). */
export interface ParsedCIDR {
  /** 4 or 6. */
  family: IpFamily;
  /** The network address in network order. */
  bytes: Uint8Array;
  /** The prefix length, 0-32 or 0-128. */
  prefix: number;
}

/** Parses `addr/prefix`, clearing host bits; null when invalid. */
export function parseCIDR(s: string, strict = false): ParsedCIDR | null {
  if (typeof s !== "string") return null;
  const slash = s.indexOf("/");
  if (slash < 0) return null;
  const ip = parseIP(s.slice(0, slash), strict);
  const ps = s.slice(slash + 1);
  if (!ip || !/^[0-9]{1,3}$/.test(ps)) return null;
  const prefix = Number(ps);
  if (prefix > ip.bytes.length * 8) return null;
  const bytes = ip.bytes.slice();
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - 8 * i));
    bytes[i] &= (0xff << (8 - keep)) & 0xff;
  }
  return { family: ip.family, bytes, prefix };
}

/** Whether `s` is an IPv4 or IPv6 CIDR ("10.0.0.0/8", "fd00::/64"). */
export function isCIDR(s: string, strict = false): boolean {
  return parseCIDR(s, strict) !== null;
}

/** Canonical `network/prefix` text of a CIDR, or null when `s` is not one. */
export function canonicalCIDR(s: string): string | null {
  const c = parseCIDR(s);
  return c ? `${formatIP(c)}/${c.prefix}` : null;
}

/** Whether `ip` lies inside `cidr` (false when the families differ). */
export function cidrContains(cidr: ParsedCIDR, ip: ParsedIP): boolean {
  if (cidr.family !== ip.family) return false;
  let bits = cidr.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((ip.bytes[i] & mask) !== cidr.bytes[i]) return false;
  }
  return true;
}
