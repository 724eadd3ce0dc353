/**
 * IPv4/IPv6 address and CIDR parsing, canonical text and containment, with
 * no dependencies. Parsing follows Kubernetes' "sloppy" rules: IPv4 octets
 * with leading zeros are read as decimal (legacy objects may still hold
 * them), zones (`%eth0`) are rejected.
 *
 * @module
 */

import type { IpFamily } from "./model.ts";

/** A parsed address: 4 bytes for IPv4, 16 for IPv6. */
export interface ParsedIP {
  family: IpFamily;
  bytes: Uint8Array;
}

/** A parsed CIDR; `bytes` is the network address (host bits cleared). */
export interface ParsedCIDR {
  family: IpFamily;
  bytes: Uint8Array;
  prefix: number;
}

const HEX = /^[0-9a-fA-F]{1,4}$/;

function parseV4(s: string): Uint8Array | null {
  // Hand-rolled: this runs once per endpoint, hundreds of thousands of times.
  const out = new Uint8Array(4);
  let part = 0;
  let digits = 0;
  let value = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (++digits > 3) return null;
      value = value * 10 + (c - 48);
    } else if (c === 46 && digits > 0 && part < 3) {
      if (value > 255) return null;
      out[part++] = value;
      digits = 0;
      value = 0;
    } else {
      return null;
    }
  }
  if (part !== 3 || digits === 0 || value > 255) return null;
  out[3] = value;
  return out;
}

function parseV6(s: string): Uint8Array | null {
  if (s.length < 2 || s.length > 45) return null;
  const out = new Uint8Array(16);
  let head = s;
  let tail = "";
  const dbl = s.indexOf("::");
  if (dbl >= 0) {
    if (s.indexOf("::", dbl + 1) >= 0) return null;
    head = s.slice(0, dbl);
    tail = s.slice(dbl + 2);
  }
  const groups = (part: string): number[] | null => {
    if (part === "") return [];
    const words: number[] = [];
    const items = part.split(":");
    for (let i = 0; i < items.length; i++) {
      const it = items[i];
      if (i === items.length - 1 && it.includes(".")) {
        // Embedded IPv4 in the last two words (e.g. ::ffff:198.18.0.1).
        const v4 = parseV4(it);
        if (!v4) return null;
        words.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
      } else {
        if (!HEX.test(it)) return null;
        words.push(parseInt(it, 16));
      }
    }
    return words;
  };
  const h = groups(head);
  const t = groups(tail);
  if (!h || !t) return null;
  if (dbl >= 0) {
    if (h.length + t.length > 7) return null;
  } else if (h.length !== 8) {
    return null;
  }
  const words = new Array<number>(8).fill(0);
  h.forEach((w, i) => words[i] = w);
  t.forEach((w, i) => words[8 - t.length + i] = w);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = words[i] >> 8;
    out[2 * i + 1] = words[i] & 0xff;
  }
  return out;
}

/** Parses an IPv4 or IPv6 address; null when `s` is not one. */
export function parseIP(s: string): ParsedIP | null {
  if (typeof s !== "string" || s.length === 0) return null;
  if (s.includes(":")) {
    const b = parseV6(s);
    return b ? { family: 6, bytes: b } : null;
  }
  const b = parseV4(s);
  return b ? { family: 4, bytes: b } : null;
}

/** Canonical text of a parsed address (dotted quad; RFC 5952 for IPv6). */
export function formatIP(ip: { family: IpFamily; bytes: Uint8Array }): string {
  const b = ip.bytes;
  if (ip.family === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  const words: number[] = [];
  for (let i = 0; i < 8; i++) words.push((b[2 * i] << 8) | b[2 * i + 1]);
  // Longest run of zero words (length >= 2, first on ties) becomes "::".
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(":");
  if (bestStart < 0) return hex(words);
  return `${hex(words.slice(0, bestStart))}::${hex(words.slice(bestStart + bestLen))}`;
}

/**
 * Canonical text of `ip`, parsed from `s`: returns `s` itself when it is
 * already canonical IPv4 (the common case, which skips formatting).
 */
export function canonicalText(s: string, ip: ParsedIP): string {
  if (ip.family !== 4) return formatIP(ip);
  for (let i = 0; i + 1 < s.length; i++) {
    // A leading zero: "0" at the start of an octet followed by another digit.
    if (
      s.charCodeAt(i) === 48 && (i === 0 || s.charCodeAt(i - 1) === 46) &&
      s.charCodeAt(i + 1) !== 46
    ) {
      return formatIP(ip);
    }
  }
  return s;
}

/** Canonical text of an address, or null when `s` is not one. */
export function canonicalIP(s: string): string | null {
  const p = parseIP(s);
  return p ? formatIP(p) : null;
}

/** The family of an address, or null when `s` is not one. */
export function ipFamily(s: string): IpFamily | null {
  return parseIP(s)?.family ?? null;
}

/** Parses `addr/prefix`, clearing host bits; null when invalid. */
export function parseCIDR(s: string): ParsedCIDR | null {
  if (typeof s !== "string") return null;
  const slash = s.indexOf("/");
  if (slash < 0) return null;
  const ip = parseIP(s.slice(0, slash));
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

/** Orders addresses: IPv4 before IPv6, then numerically. */
export function compareIP(a: ParsedIP, b: ParsedIP): number {
  if (a.family !== b.family) return a.family - b.family;
  for (let i = 0; i < a.bytes.length; i++) {
    if (a.bytes[i] !== b.bytes[i]) return a.bytes[i] - b.bytes[i];
  }
  return 0;
}
