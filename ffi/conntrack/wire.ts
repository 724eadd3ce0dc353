/**
 * The conntrack client's wire values, pure and testable without the library: addresses in
 * the network order libnetfilter_conntrack reads and writes, ctnetlink delete requests
 * (header, CTA_ID, the NOOP fence; framing and acks are ../netlink/message.ts), and the
 * validation that turns a batch of entries into wire values before anything is sent.
 *
 * @module
 */
import { formatIPv4Number, parseIPv4Number, parseIPv6Bytes } from "../../net/ip.ts";
import {
  align4,
  HOST_LE,
  NFNL_HDRLEN,
  NLM_F_ACK,
  NLM_F_REQUEST,
  NLMSG_HDRLEN,
  NLMSG_NOOP,
  putHeader,
} from "../netlink/message.ts";
import type { ConntrackEntry } from "./types.ts";

/** True on little-endian hosts (x86_64, arm64): network-order values arrive byte-swapped. */
export const LITTLE_ENDIAN: boolean = HOST_LE;

// ---------------------------------------------------------------------------
// Pure helpers: address text <-> the library's network-order representation.
// ---------------------------------------------------------------------------

/** Converts a 16-bit value between network and host order (its own inverse). */
export function swap16(v: number): number {
  return LITTLE_ENDIAN ? ((v & 0xff) << 8) | ((v >>> 8) & 0xff) : v & 0xffff;
}

/** Reverses the byte order of a u32. */
function bswap32(v: number): number {
  return (((v & 0xff) << 24) | ((v & 0xff00) << 8) | ((v >>> 8) & 0xff00) | (v >>> 24)) >>> 0;
}

/**
 * Formats an IPv4 address held as a u32 in network byte order, as read by
 * `nfct_get_attr_u32` (the first octet is the lowest byte on little-endian hosts).
 */
export function formatIpv4(v: number): string {
  return formatIPv4Number(LITTLE_ENDIAN ? bswap32(v) : v >>> 0);
}

/**
 * Parses dotted-quad IPv4 text into the u32 network-order value that
 * `nfct_set_attr_u32` expects, or returns -1 when the text is not a plain
 * dotted quad (strict: the entries come from our own canonical text).
 */
export function parseIpv4(s: string): number {
  const v = parseIPv4Number(s, 0, s.length, true);
  return v < 0 || !LITTLE_ENDIAN ? v : bswap32(v);
}

// ---------------------------------------------------------------------------
// Pure helpers: ctnetlink delete requests (framing and acks: ../netlink/message.ts).
// ---------------------------------------------------------------------------

/** nlmsghdr (16) + nfgenmsg (4). */
const NLMSG_CT_HDRLEN: number = NFNL_HDRLEN;
/** `(NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE`. */
export const CT_DELETE_TYPE = (1 << 8) | 2;
/** ctnetlink attribute carrying the conntrack id (u32, big-endian). */
export const CTA_ID = 12;

/**
 * Writes the nlmsghdr + nfgenmsg of a conntrack delete request at `off`
 * (length set to the header alone; attributes are appended after it). Without
 * `ack` the kernel answers only when the delete fails.
 */
export function putDeleteHeader(
  dv: DataView,
  off: number,
  seq: number,
  af: number,
  ack = false,
): void {
  const flags = NLM_F_REQUEST | (ack ? NLM_F_ACK : 0);
  putHeader(dv, off, NLMSG_CT_HDRLEN, CT_DELETE_TYPE, flags, seq, af);
}

/**
 * Writes an NLMSG_NOOP request with NLM_F_ACK at `off` and returns its
 * length. The kernel handles the messages of one sendto in order, so its ack
 * arrives after the error reports of every delete sent before it: a fence.
 */
export function putFence(dv: DataView, off: number, seq: number): number {
  putHeader(dv, off, NLMSG_HDRLEN, NLMSG_NOOP, NLM_F_REQUEST | NLM_F_ACK, seq);
  return NLMSG_HDRLEN;
}

/**
 * Appends a CTA_ID attribute to the message at `off` and updates its
 * nlmsg_len. Returns the new message length.
 */
export function appendIdAttr(dv: DataView, off: number, id: number): number {
  const len = dv.getUint32(off, LITTLE_ENDIAN);
  const at = off + align4(len);
  dv.setUint16(at, 8, LITTLE_ENDIAN);
  dv.setUint16(at + 2, CTA_ID, LITTLE_ENDIAN);
  dv.setUint32(at + 4, id >>> 0, false);
  const newLen = align4(len) + 8;
  dv.setUint32(off, newLen, LITTLE_ENDIAN);
  return newLen;
}

/** Checks an entry and says what is wrong with it, or returns undefined. */
export function entryProblem(e: ConntrackEntry): string | undefined {
  if (e.family !== 4 && e.family !== 6) return `family must be 4 or 6, got ${e.family}`;
  if (!Number.isInteger(e.proto) || e.proto < 0 || e.proto > 255) {
    return `proto must be an integer 0-255, got ${e.proto}`;
  }
  for (const k of ["origSport", "origDport"] as const) {
    if (!Number.isInteger(e[k]) || e[k] < 0 || e[k] > 65535) {
      return `${k} must be an integer 0-65535, got ${e[k]}`;
    }
  }
  if (!Number.isInteger(e.zone) || e.zone < 0 || e.zone > 65535) {
    return `zone must be an integer 0-65535, got ${e.zone}`;
  }
  if (!Number.isInteger(e.id) || e.id < 0 || e.id > 0xffffffff) {
    return `id must be a u32 (0 = unknown), got ${e.id}`;
  }
  return undefined;
}

/** Delete requests validated and converted to wire values, before anything is sent. */
export interface EncodedDeletes {
  /** Source and destination per entry, network order (IPv4 entries only). */
  v4: Uint32Array;
  /** 32 bytes per entry: source then destination (IPv6 entries only). */
  v6: Uint8Array | undefined;
}

/** Validates every entry and converts its addresses before anything is sent. */
export function encodeDeletes(entries: readonly ConntrackEntry[]): EncodedDeletes {
  const v4 = new Uint32Array(entries.length * 2);
  let v6: Uint8Array | undefined;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    let problem = entryProblem(e);
    if (problem === undefined && e.family === 4) {
      const s = parseIpv4(e.origSrc);
      const d = parseIpv4(e.origDst);
      if (s < 0) problem = `origSrc ${JSON.stringify(e.origSrc)} is not an IPv4 address`;
      else if (d < 0) problem = `origDst ${JSON.stringify(e.origDst)} is not an IPv4 address`;
      v4[2 * i] = s;
      v4[2 * i + 1] = d;
    } else if (problem === undefined) {
      v6 ??= new Uint8Array(entries.length * 32);
      if (!parseIPv6Bytes(e.origSrc, v6, 32 * i, true)) {
        problem = `origSrc ${JSON.stringify(e.origSrc)} is not an IPv6 address`;
      } else if (!parseIPv6Bytes(e.origDst, v6, 32 * i + 16, true)) {
        problem = `origDst ${JSON.stringify(e.origDst)} is not an IPv6 address`;
      }
    }
    if (problem !== undefined) {
      throw new TypeError(`conntrack delete: entry ${i}: ${problem}; nothing was deleted`);
    }
  }
  return { v4, v6 };
}
