/**
 * One element of a set or map by key, over plain netlink (NFT_MSG_GETSETELEM):
 * a single hash lookup in the kernel. libnftables 1.0.6's `get element`
 * first fills its cache with every element of every set, which on a node with
 * 80k endpoint buckets costs 2 s per lookup (a `trace` made of 40 lookups took
 * nearly two minutes). The request, the reply decoded into the element nft
 * would list (values as nft prints them), and {@link lookupElement} sending it.
 *
 * @module
 */
import { formatIP, formatIPv6Bytes } from "../../../net/ip.ts";
import type { Element } from "../types.ts";
import { encodeValue, type Field, type SetLayout } from "./codec.ts";
import {
  align4,
  attributeMap,
  errnoAt,
  NLA_F_NESTED,
  NLM_F_ACK,
  NLM_F_REQUEST,
} from "../../netlink/message.ts";
import { netfilterDump } from "../../netlink/socket.ts";
import { FAMILY_NUMBER, NFT_MSG, nftType } from "./nf_tables.ts";

const PROTO_NAME: Record<number, string> = {
  1: "icmp",
  6: "tcp",
  17: "udp",
  58: "ipv6-icmp",
  132: "sctp",
};
const VERDICT: Record<number, string> = {
  0: "drop",
  1: "accept",
  [-1]: "continue",
  [-5]: "return",
  [-3]: "jump",
  [-4]: "goto",
};
const enc = new TextEncoder();
const dec = new TextDecoder();

function attr(type: number, value: Uint8Array, nested = false): Uint8Array {
  const b = new Uint8Array(align4(4 + value.length));
  const v = new DataView(b.buffer);
  v.setUint16(0, 4 + value.length, true);
  v.setUint16(2, type | (nested ? NLA_F_NESTED : 0), true);
  b.set(value, 4);
  return b;
}
const cat = (parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
};
const strz = (s: string) => cat([enc.encode(s), new Uint8Array(1)]);

/** The GETSETELEM request for `key`, or undefined when the key does not fit the set's layout. */
export function encodeGetElement(
  family: string,
  table: string,
  set: string,
  layout: SetLayout,
  key: readonly string[],
  seq: number,
): Uint8Array | undefined {
  const bytes = encodeValue(layout.key, key);
  const fam = FAMILY_NUMBER[family];
  if (bytes === undefined || fam === undefined) return undefined;
  const elem = attr(1, attr(1, attr(1, bytes), true), true); // LIST_ELEM { KEY { VALUE } }
  const body = cat([attr(1, strz(table)), attr(2, strz(set)), attr(3, elem, true)]);
  const msg = new Uint8Array(20 + body.length);
  const v = new DataView(msg.buffer);
  v.setUint32(0, msg.length, true);
  v.setUint16(4, nftType(NFT_MSG.GETSETELEM), true);
  v.setUint16(6, NLM_F_REQUEST | NLM_F_ACK, true);
  v.setUint32(8, seq, true);
  msg[16] = fam;
  msg.set(body, 20);
  return msg;
}

const nested = (b: Uint8Array) => attributeMap(b);

function fieldText(f: Field, b: Uint8Array): string {
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  switch (f.kind) {
    case "ipv4":
      return formatIP({ family: 4, bytes: b });
    case "ipv6":
      return formatIPv6Bytes(b);
    case "proto":
      return PROTO_NAME[b[0]] ?? String(b[0]);
    case "service":
      return String(v.getUint16(0, false));
    case "u32host":
      return String(v.getUint32(0, true));
    case "verdict":
      return "";
  }
}

/** A value's parts as nft prints them (one per field); undefined when the size is wrong. */
export function decodeValue(fields: Field[], b: Uint8Array): string[] | undefined {
  const concat = fields.length > 1;
  const out: string[] = [];
  let off = 0;
  for (const f of fields) {
    if (off + f.len > b.length) return undefined;
    out.push(fieldText(f, b.subarray(off, off + f.len)));
    off += concat ? align4(f.len) : f.len;
  }
  return off === b.length || (!concat && off <= b.length) ? out : undefined;
}

function verdictText(b: Uint8Array): string | undefined {
  const a = nested(b);
  const code = a.get(1);
  if (code === undefined || code.length < 4) return undefined;
  const name = VERDICT[new DataView(code.buffer, code.byteOffset, 4).getInt32(0, false)];
  const chain = a.get(2);
  return chain === undefined ? name : `${name} ${dec.decode(chain.subarray(0, chain.indexOf(0)))}`;
}

/** What a reply buffer held: the element, the lookup's errno (0: answered), or neither yet. */
export interface GetReply {
  /** The element the kernel returned, when the lookup found it. */
  element?: Element;
  /** The lookup's errno from the ack (0: answered; ENOENT: no such element). */
  errno?: number;
}

/**
 * Reads the messages of one receive buffer answering a GETSETELEM with
 * sequence `seq`: the NEWSETELEM carrying the element, then the ack (or an
 * error: ENOENT when there is no such element).
 */
export function parseGetElementReply(
  buf: Uint8Array,
  len: number,
  seq: number,
  layout: SetLayout,
  target: { set?: string; map?: string },
  key: readonly string[],
  into: GetReply,
): GetReply {
  const v = new DataView(buf.buffer, buf.byteOffset, len);
  for (let off = 0; off + 16 <= len;) {
    const mlen = v.getUint32(off, true), type = v.getUint16(off + 4, true);
    if (mlen < 16 || off + mlen > len) break;
    if (v.getUint32(off + 8, true) === seq) {
      const errno = errnoAt(v, off);
      if (errno !== undefined) {
        into.errno = Math.abs(errno);
      } else if ((type & 0xff) === NFT_MSG.NEWSETELEM) {
        const list = attributeMap(buf, off + 20, off + mlen).get(3);
        const el = list && nested(list).get(1);
        if (el !== undefined) into.element = elementOf(nested(el), layout, target, key);
      }
    }
    off += align4(mlen);
  }
  return into;
}

/**
 * The element one NFTA_LIST_ELEM's attributes (`a`) describe, its key
 * already decoded: the data (value or verdict) and the comment as nft
 * prints them. Parts that do not decode are left out.
 */
export function elementOf(
  a: Map<number, Uint8Array>,
  layout: SetLayout,
  target: { set?: string; map?: string },
  key: readonly string[],
): Element {
  const el: Element = { kind: "element", ...target, key: [...key] };
  const data = a.get(2);
  if (data !== undefined && layout.data !== undefined) {
    const d = nested(data);
    const verdict = d.get(2);
    const value = verdict !== undefined
      ? [verdictText(verdict) ?? ""]
      : d.get(1) && decodeValue(layout.data, d.get(1)!);
    if (value !== undefined) el.value = value;
  }
  const ud = a.get(6);
  if (ud !== undefined && ud.length >= 2 && ud[0] === 0) {
    const c = ud.subarray(2, 2 + ud[1]);
    el.comment = dec.decode(c.subarray(0, c.indexOf(0) < 0 ? c.length : c.indexOf(0)));
  }
  return el;
}

let seq = 1;

/**
 * Looks `key` up in set or map `name` of `family table` (synchronous, one
 * round trip). Null when there is no such element; undefined when the key
 * does not fit the layout (the caller asks libnftables instead). Throws on
 * any other kernel error.
 */
export function lookupElement(
  family: string,
  table: string,
  kind: "set" | "map",
  name: string,
  layout: SetLayout,
  key: readonly string[],
): Element | null | undefined {
  const s = seq = (seq % 0x7fffffff) + 1;
  const req = encodeGetElement(family, table, name, layout, key, s);
  if (req === undefined) return undefined;
  const target = kind === "map" ? { map: name } : { set: name };
  const out: GetReply = {};
  netfilterDump("element", req, (buf, len) => {
    parseGetElementReply(buf, len, s, layout, target, key, out);
    return out.errno === undefined ? "more" : "done";
  });
  if (out.errno === 2) return null; // ENOENT: no such element
  if (out.errno !== 0) throw new Error(`get element ${name}: errno ${out.errno}`);
  return out.element ?? null;
}
