/**
 * IPv4 and IPv6 addresses: text <-> bytes and numbers, canonical text, family and order.
 * The one IP parser of the tree; CIDRs are in cidr.ts.
 *
 * Leading zeros in IPv4 octets: Kubernetes reads every address it is given, from API objects
 * and from kube-proxy's flags and config alike, with k8s.io/utils/net `ParseIPSloppy`, which
 * reads "010" as decimal 10 (legacy objects may still hold such text). That is the default
 * here. `strict` gives Go's `net.ParseIP` (Go >= 1.17), which rejects them: for text that a
 * program of ours wrote and that must already be canonical. Zones (`%eth0`) are rejected.
 *
 * @module
 */

import type { IpFamily } from "./family.ts";

/** A parsed address: 4 bytes for IPv4, 16 for IPv6. */
export interface ParsedIP {
  /** 4 or 6. */
  family: IpFamily;
  /** The address in network order. */
  bytes: Uint8Array;
}

/**
 * Parses dotted-quad text in `s[from, to)` into its 32-bit value (first octet most
 * significant), or -1 when it is not one. `strict` rejects octets with leading zeros.
 */
export function parseIPv4Number(s: string, from = 0, to = s.length, strict = false): number {
  // Hand-rolled: this runs once per endpoint, hundreds of thousands of times.
  let out = 0;
  let parts = 0;
  let digits = 0;
  let value = 0;
  for (let i = from; i <= to; i++) {
    const c = i === to ? 46 : s.charCodeAt(i); // a virtual trailing '.'
    if (c >= 48 && c <= 57) {
      if (++digits > 3 || (strict && digits > 1 && value === 0)) return -1;
      value = value * 10 + (c - 48);
    } else if (c === 46 && digits > 0 && parts < 4 && value <= 255) {
      out = out * 256 + value;
      parts++;
      digits = 0;
      value = 0;
    } else {
      return -1;
    }
  }
  return parts === 4 ? out : -1;
}

/** Dotted-quad text of a 32-bit value (first octet most significant). */
export function formatIPv4Number(v: number): string {
  return `${v >>> 24}.${(v >>> 16) & 0xff}.${(v >>> 8) & 0xff}.${v & 0xff}`;
}

const HEX = /^[0-9a-fA-F]{1,4}$/;

/** The 16-bit words of one side of "::" (an IPv4 tail allowed last when `last`), or null. */
function words(part: string, last: boolean, strict: boolean): number[] | null {
  if (part === "") return [];
  const out: number[] = [];
  const items = part.split(":");
  for (let i = 0; i < items.length; i++) {
    const it = items[i];
    if (last && i === items.length - 1 && it.includes(".")) {
      // Embedded IPv4 in the last two words (e.g. ::ffff:198.18.0.1).
      const v4 = parseIPv4Number(it, 0, it.length, strict);
      if (v4 < 0) return null;
      out.push(v4 >>> 16, v4 & 0xffff);
    } else {
      if (!HEX.test(it)) return null;
      out.push(parseInt(it, 16));
    }
  }
  return out;
}

/**
 * Parses IPv6 text (with `::` and an optional trailing dotted quad) into 16 bytes at
 * `out[off]`; false when `s` is not an IPv6 address. `strict` applies to the dotted quad.
 */
export function parseIPv6Bytes(s: string, out: Uint8Array, off = 0, strict = false): boolean {
  if (s.length < 2 || s.length > 45) return false;
  const dbl = s.indexOf("::");
  if (dbl >= 0 && s.indexOf("::", dbl + 1) >= 0) return false;
  const h = words(dbl < 0 ? s : s.slice(0, dbl), dbl < 0, strict);
  const t = dbl < 0 ? [] : words(s.slice(dbl + 2), true, strict);
  if (!h || !t) return false;
  if (dbl >= 0 ? h.length + t.length > 7 : h.length !== 8) return false;
  out.fill(0, off, off + 16);
  for (let i = 0; i < h.length; i++) {
    out[off + 2 * i] = h[i] >> 8;
    out[off + 2 * i + 1] = h[i] & 0xff;
  }
  for (let i = 0; i < t.length; i++) {
    const at = off + 2 * (8 - t.length + i);
    out[at] = t[i] >> 8;
    out[at + 1] = t[i] & 0xff;
  }
  return true;
}

/**
 * How IPv6 text shows an embedded IPv4 address: `"hex"` never (`::ffff:c612:1`); `"mapped"`
 * for IPv4-mapped addresses (`::ffff:198.18.0.1`, RFC 5952 section 5); `"inet_ntop"` as glibc
 * writes it, which also keeps the deprecated IPv4-compatible form (`::198.18.0.1`), as nft does.
 */
export type V4Tail = "hex" | "mapped" | "inet_ntop";

/** RFC 5952 text of the 16 bytes at `b[off]`: lowercase, the longest zero run (>= 2) as `::`. */
export function formatIPv6Bytes(b: Uint8Array, off = 0, tail: V4Tail = "hex"): string {
  const w: number[] = [];
  for (let i = 0; i < 8; i++) w.push((b[off + 2 * i] << 8) | b[off + 2 * i + 1]);
  // Longest run of zero words (length >= 2, first on ties) becomes "::".
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (w[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  if (best === 0 && tail !== "hex") {
    const v4 = `${b[off + 12]}.${b[off + 13]}.${b[off + 14]}.${b[off + 15]}`;
    if (bestLen === 5 && w[5] === 0xffff) return `::ffff:${v4}`;
    if (bestLen === 6 && tail === "inet_ntop") return `::${v4}`;
  }
  const hex = (ws: number[]) => ws.map((x) => x.toString(16)).join(":");
  if (best < 0) return hex(w);
  return `${hex(w.slice(0, best))}::${hex(w.slice(best + bestLen))}`;
}

/** Parses an IPv4 or IPv6 address; null when `s` is not one. */
export function parseIP(s: string, strict = false): ParsedIP | null {
  if (typeof s !== "string" || s.length === 0) return null;
  if (s.includes(":")) {
    const bytes = new Uint8Array(16);
    return parseIPv6Bytes(s, bytes, 0, strict) ? { family: 6, bytes } : null;
  }
  const v = parseIPv4Number(s, 0, s.length, strict);
  if (v < 0) return null;
  return {
    family: 4,
    bytes: new Uint8Array([v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff]),
  };
}

/** Canonical text of a parsed address (dotted quad; RFC 5952 for IPv6). */
export function formatIP(
  ip: { family: IpFamily; bytes: Uint8Array },
  tail: V4Tail = "hex",
): string {
  const b = ip.bytes;
  if (ip.family === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  return formatIPv6Bytes(b, 0, tail);
}

/**
 * Canonical text of `ip`, parsed from `s`: returns `s` itself when it is already canonical
 * IPv4 (the common case, which skips formatting).
 */
export function canonicalText(s: string, ip: ParsedIP): string {
  if (ip.family !== 4) return formatIP(ip);
  const b = ip.bytes;
  return canonicalIPv4Text(s, ((b[0] << 24) >>> 0) + (b[1] << 16) + (b[2] << 8) + b[3]);
}

/**
 * Canonical text of the IPv4 address `v` ({@link parseIPv4Number}) parsed from `s`: `s` itself
 * unless an octet has a leading zero. Allocates nothing in the common case.
 */
export function canonicalIPv4Text(s: string, v: number): string {
  for (let i = 0; i + 1 < s.length; i++) {
    // A leading zero: "0" at the start of an octet followed by another digit.
    if (
      s.charCodeAt(i) === 48 && (i === 0 || s.charCodeAt(i - 1) === 46) &&
      s.charCodeAt(i + 1) !== 46
    ) {
      return formatIPv4Number(v);
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

/** Whether `s` is an IPv4 address (leading zeros allowed unless `strict`). */
export function isIPv4(s: string, strict = false): boolean {
  return parseIP(s, strict)?.family === 4;
}

/** Whether `s` is an IPv6 address (no zone). */
export function isIPv6(s: string, strict = false): boolean {
  return parseIP(s, strict)?.family === 6;
}

/** Orders addresses: IPv4 before IPv6, then numerically. */
export function compareIP(a: ParsedIP, b: ParsedIP): number {
  if (a.family !== b.family) return a.family - b.family;
  for (let i = 0; i < a.bytes.length; i++) {
    if (a.bytes[i] !== b.bytes[i]) return a.bytes[i] - b.bytes[i];
  }
  return 0;
}

/** The address as one unsigned number (for interval arithmetic). */
export function ipToBigInt(bytes: Uint8Array): bigint {
  let v = 0n;
  for (const x of bytes) v = (v << 8n) | BigInt(x);
  return v;
}

/** The `len` bytes (4 or 16) of an address held as one unsigned number. */
export function bigIntToBytes(v: bigint, len: number): Uint8Array {
  const out = new Uint8Array(len);
  for (let i = len - 1; i >= 0; i--, v >>= 8n) out[i] = Number(v & 0xffn);
  return out;
}
