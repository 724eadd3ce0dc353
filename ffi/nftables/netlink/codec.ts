/**
 * Encodes element-only transactions as nf_tables netlink batches, the bytes
 * libnftables would send, without its parser: at 30k Services a cold start
 * is ~400k elements, which libnftables spends seconds and hundreds of MB on.
 *
 * Layout (linux/netfilter/nfnetlink.h, nf_tables.h): NFNL_MSG_BATCH_BEGIN,
 * then NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM messages each holding the
 * table, the set and a list of elements (key, data, userdata), then
 * NFNL_MSG_BATCH_END. The kernel applies the batch atomically. Keys and
 * values are encoded field by field, each field padded to 4 bytes as in a
 * register concatenation; comments go in the element's userdata as nft
 * writes them (TLV type 0, NUL-terminated).
 *
 * Pure: no FFI here (ffi/netlink/socket.ts sends the bytes; ffi/netlink/message.ts
 * holds the framing shared with conntrack).
 *
 * @module
 */
import { parseIP, parseIPv4Number } from "../../../net/ip.ts";
import {
  align4,
  NLA_F_NESTED,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_ECHO,
  NLM_F_REQUEST,
  putHeader,
} from "../../netlink/message.ts";
import type { AckedBatch } from "../../netlink/socket.ts";
import { BATCH_MARK_LEN, FAMILY_NUMBER, NFT_MSG, nftType, putBatchMark } from "./nf_tables.ts";
import type { Element, Map as NftMap, Operation, Set as NftSet } from "../types.ts";

/** One field of a key or value. */
export interface Field {
  /** How the field's bytes are encoded (byte order and padding follow from it). */
  kind: "ipv4" | "ipv6" | "proto" | "service" | "u32host" | "verdict";
  /** Bytes before padding. */
  len: number;
}

const FIELD: Record<string, Field> = {
  ipv4_addr: { kind: "ipv4", len: 4 },
  ipv6_addr: { kind: "ipv6", len: 16 },
  inet_proto: { kind: "proto", len: 1 },
  inet_service: { kind: "service", len: 2 },
  mark: { kind: "u32host", len: 4 },
  integer: { kind: "u32host", len: 4 },
  verdict: { kind: "verdict", len: 0 },
};

/** The datatype of an expression after `typeof`, for the expressions we use. */
function typeofField(expr: string): Field | undefined {
  const e = expr.trim().replace(/\s+/g, " ");
  if (/^ip (saddr|daddr)$/.test(e)) return FIELD.ipv4_addr;
  if (/^ip6 (saddr|daddr)$/.test(e)) return FIELD.ipv6_addr;
  if (e === "meta l4proto") return FIELD.inet_proto;
  if (/^(th|tcp|udp|sctp) (sport|dport)$/.test(e)) return FIELD.inet_service;
  if (/^numgen (random|inc) mod \d+$/.test(e)) return FIELD.integer;
  if (e === "meta mark" || e === "ct mark") return FIELD.mark;
  return undefined;
}

/** The fields of a key or data type (`ipv4_addr . inet_service`, or typeof expressions). */
export function parseFields(type: string, typeOf: boolean): Field[] | undefined {
  const parts = type.split(" . ");
  const out: Field[] = [];
  for (const p of parts) {
    const f = typeOf ? typeofField(p) : FIELD[p.trim()];
    if (f === undefined) return undefined;
    out.push(f);
  }
  if (out.some((f) => f.kind === "verdict") && out.length > 1) return undefined;
  return out;
}

/** What the encoder needs to know of a set or map. */
export interface SetLayout {
  /** The fields of the key, concatenated in order. */
  key: Field[];
  /** Undefined for a set. */
  data?: Field[];
}

/** The layout of a set or map declaration, or undefined when it uses a type we do not encode. */
export function layoutOf(s: NftSet | NftMap): SetLayout | undefined {
  if ((s.flags ?? []).includes("interval")) return undefined;
  const typeOf = s.type.startsWith("typeof ");
  const key = parseFields(typeOf ? s.type.slice(7) : s.type, typeOf);
  if (key === undefined) return undefined;
  if (s.kind === "set") return { key };
  const data = parseFields(s.dataType, typeOf && s.dataType !== "verdict");
  return data === undefined ? undefined : { key, data };
}

const PROTO: Record<string, number> = { tcp: 6, udp: 17, sctp: 132, icmp: 1, "ipv6-icmp": 58 };

/** Writes the IPv4 address in text[from, to) into out at off; false when it is not one. */
function putIPv4(text: string, from: number, to: number, out: DataView, off: number): boolean {
  const v = parseIPv4Number(text, from, to);
  if (v < 0) return false;
  out.setUint32(off, v); // big-endian: network order
  return true;
}

/** A decimal or 0x-hex number in text[from, to), or -1. */
function number(text: string, from: number, to: number): number {
  if (from >= to) return -1;
  if (to - from > 2 && text[from] === "0" && (text[from + 1] === "x" || text[from + 1] === "X")) {
    const v = parseInt(text.slice(from + 2, to), 16);
    return /^[0-9a-f]+$/i.test(text.slice(from + 2, to)) ? v : -1;
  }
  let v = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return -1;
    v = v * 10 + (c - 48);
  }
  return v;
}

/** Encodes text[from, to) as field `f` into `out` at `off`; false when it does not fit the type. */
function putField(
  f: Field,
  text: string,
  from: number,
  to: number,
  out: DataView,
  off: number,
): boolean {
  switch (f.kind) {
    case "ipv4":
      return putIPv4(text, from, to, out, off);
    case "ipv6": {
      const ip = parseIP(text.slice(from, to));
      if (ip === null || ip.family !== 6) return false;
      ip.bytes.forEach((b, i) => out.setUint8(off + i, b));
      return true;
    }
    case "proto": {
      const t = text.slice(from, to);
      const v = PROTO[t] ?? number(text, from, to);
      if (v < 0 || v > 255) return false;
      out.setUint8(off, v);
      return true;
    }
    case "service": {
      const v = number(text, from, to);
      if (v < 0 || v > 65535) return false;
      out.setUint16(off, v, false);
      return true;
    }
    case "u32host": {
      const v = number(text, from, to);
      if (v < 0 || v > 0xffffffff) return false;
      // Registers hold these in host order (numgen, meta mark).
      out.setUint32(off, v, true);
      return true;
    }
  }
  return false;
}

/** Size in bytes of a key or value of these fields. */
function valueSize(fields: Field[]): number {
  return fields.length > 1 ? fields.reduce((n, f) => n + align4(f.len), 0) : fields[0].len;
}

/**
 * Writes the bytes of a key or value (parts in nft text, each holding one or
 * more ` . `-separated fields) into `out` at `off`; false when they do not
 * match the fields. A lone field keeps its size; in a concatenation each
 * field takes whole 4-byte registers (zero padded).
 */
function putValue(fields: Field[], parts: readonly string[], out: DataView, off: number): boolean {
  const concat = fields.length > 1;
  let fi = 0;
  for (const text of parts) {
    let from = 0;
    for (;;) {
      if (fi >= fields.length) return false;
      const sep = text.indexOf(" . ", from);
      const to = sep < 0 ? text.length : sep;
      const f = fields[fi++];
      // No padding to write: callers hand in zeroed memory (encodeValue's, or the Writer's).
      if (!putField(f, text, from, to, out, off)) return false;
      off += concat ? align4(f.len) : f.len;
      if (sep < 0) break;
      from = sep + 3;
    }
  }
  return fi === fields.length;
}

/** The bytes of a key or value, or undefined when it does not match the fields. */
export function encodeValue(fields: Field[], parts: readonly string[]): Uint8Array | undefined {
  const buf = new Uint8Array(valueSize(fields));
  return putValue(fields, parts, new DataView(buf.buffer), 0) ? buf : undefined;
}

// nf_tables / nfnetlink constants.
/** NFTA_TABLE_NAME (enum nft_table_attributes). */
const NFTA_TABLE_NAME = 1;
const NFTA_SET_ELEM_LIST_TABLE = 1;
const NFTA_SET_ELEM_LIST_SET = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS = 3;
const NFTA_LIST_ELEM = 1;
const NFTA_SET_ELEM_KEY = 1;
const NFTA_SET_ELEM_DATA = 2;
const NFTA_SET_ELEM_USERDATA = 6;
const NFTA_DATA_VALUE = 1;
const NFTA_DATA_VERDICT = 2;
const NFTA_VERDICT_CODE = 1;
const NFTA_VERDICT_CHAIN = 2;
const NFTNL_UDATA_SET_ELEM_COMMENT = 0;
const VERDICTS: Record<string, number> = {
  drop: 0,
  accept: 1,
  continue: -1,
  return: -5,
  jump: -3,
  goto: -4,
};

/** Elements per message: the kernel copes with more, this keeps each message small. */
const PER_MESSAGE = 512;

const enc = new TextEncoder();

/** A growable little buffer of netlink attributes. */
class Writer {
  buf: Uint8Array;
  view: DataView;
  off = 0;

  /** `size`: the first buffer's bytes (it doubles as needed). */
  constructor(size: number) {
    this.buf = new Uint8Array(size);
    this.view = new DataView(this.buf.buffer);
  }

  reserve(n: number): void {
    if (this.off + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.off + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.off));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  /** Starts an attribute; returns its offset for {@link end}. */
  begin(type: number, nested: boolean): number {
    this.reserve(4);
    const at = this.off;
    this.view.setUint16(at + 2, type | (nested ? NLA_F_NESTED : 0), true);
    this.off += 4;
    return at;
  }
  end(at: number): void {
    this.view.setUint16(at, this.off - at, true);
    this.align();
  }
  attr(type: number, bytes: Uint8Array): void {
    const at = this.begin(type, false);
    this.reserve(bytes.length + 3);
    this.buf.set(bytes, this.off);
    this.off += bytes.length;
    this.end(at);
  }
  /** An attribute holding a key or value; false when the text does not fit. */
  value(type: number, fields: Field[], parts: readonly string[]): boolean {
    const size = valueSize(fields);
    const at = this.begin(type, false);
    this.reserve(size + 3);
    if (!putValue(fields, parts, this.view, this.off)) return false;
    this.off += size;
    this.end(at);
    return true;
  }
  strz(type: number, s: string): void {
    const at = this.begin(type, false);
    this.text(s);
    this.reserve(1);
    this.off++; // the NUL (zeroed memory)
    this.end(at);
  }
  /** The UTF-8 bytes of `s`; ASCII (all names and most comments) without an encoder call. */
  text(s: string): void {
    this.reserve(s.length);
    const buf = this.buf;
    let off = this.off;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c > 0x7f) {
        const b = enc.encode(s);
        this.reserve(b.length);
        this.buf.set(b, this.off);
        this.off += b.length;
        return;
      }
      buf[off++] = c;
    }
    this.off = off;
  }
  /** Pads to 4 bytes: the buffer is zeroed and written forward only, so padding is already 0. */
  align(): void {
    const n = (4 - (this.off & 3)) & 3;
    if (n !== 0) {
      this.reserve(n);
      this.off += n;
    }
  }
  /** Starts a netlink message; returns its offset for {@link endMsg}. */
  msg(type: number, flags: number, seq: number, family: number, resId: number): number {
    this.reserve(20);
    const at = this.off;
    putHeader(this.view, at, 0, type, flags, seq, family, resId);
    this.off += 20;
    return at;
  }
  /** A batch begin or end message. */
  batchMark(mark: "begin" | "end", seq: number, flags?: number): void {
    this.reserve(BATCH_MARK_LEN);
    putBatchMark(this.view, this.off, mark, seq, flags);
    this.off += BATCH_MARK_LEN;
  }
  endMsg(at: number): void {
    this.view.setUint32(at, this.off - at, true);
  }
}

/** A netlink batch and the sequence numbers of the messages that carry elements. */
export interface Batch extends AckedBatch {
  /** For each seq, the index of the first op it carries (to name a failure). */
  firstOp: number[];
  /** How many element operations it carries. */
  elements: number;
}

/**
 * Encodes `ops` (element adds and deletes only) as one batch, or returns
 * undefined when an op is something else or does not fit its set's layout.
 * The batch asks for its commit's generation id back: writer.ts tells its own
 * commits from others' by it. The kernel echoes the NEWGEN when the batch's
 * first message has NLM_F_ECHO, and echoes that message's own notifications
 * too; so the first message is a no-op that notifies nothing (NEWTABLE of the
 * table with no attribute to change: no transaction).
 */
export function encodeBatch(
  family: string,
  table: string,
  ops: readonly Operation[],
  layoutOfSet: (name: string) => SetLayout | undefined,
  seq0: number,
): Batch | undefined {
  const fam = FAMILY_NUMBER[family];
  if (fam === undefined) return undefined;
  // ~100 bytes an element: a change's few elements should not allocate (and zero) 64 KiB.
  const w = new Writer(Math.max(1 << 10, ops.length * 128));
  const seqs: number[] = [], firstOp: number[] = [];
  let seq = seq0;
  w.batchMark("begin", seq++);
  const echo = w.msg(nftType(NFT_MSG.NEWTABLE), NLM_F_REQUEST | NLM_F_ECHO, seq++, fam, 0);
  w.strz(NFTA_TABLE_NAME, table);
  w.endMsg(echo);
  let i = 0;
  while (i < ops.length) {
    const op = ops[i];
    if (op.obj.kind !== "element" || (op.verb !== "add" && op.verb !== "delete")) return undefined;
    const target = op.obj.map ?? op.obj.set;
    const layout = target === undefined ? undefined : layoutOfSet(target);
    if (layout === undefined) return undefined;
    const type = nftType(op.verb === "add" ? NFT_MSG.NEWSETELEM : NFT_MSG.DELSETELEM);
    const flags = NLM_F_REQUEST | NLM_F_ACK | (op.verb === "add" ? NLM_F_CREATE : 0);
    seqs.push(seq);
    firstOp.push(i);
    const m = w.msg(type, flags, seq++, fam, 0);
    w.strz(NFTA_SET_ELEM_LIST_TABLE, table);
    w.strz(NFTA_SET_ELEM_LIST_SET, target!);
    const list = w.begin(NFTA_SET_ELEM_LIST_ELEMENTS, true);
    let n = 0;
    for (; i < ops.length && n < PER_MESSAGE; i++, n++) {
      const o = ops[i];
      if (o.verb !== op.verb || o.obj.kind !== "element") break;
      if ((o.obj.map ?? o.obj.set) !== target) break;
      if (!putElement(w, o.obj, layout, o.verb === "add")) return undefined;
    }
    w.end(list);
    w.endMsg(m);
  }
  w.batchMark("end", seq++);
  return { bytes: w.buf.subarray(0, w.off), seqs, firstOp, elements: ops.length };
}

function putElement(w: Writer, e: Element, layout: SetLayout, withData: boolean): boolean {
  const el = w.begin(NFTA_LIST_ELEM, true);
  const k = w.begin(NFTA_SET_ELEM_KEY, true);
  if (!w.value(NFTA_DATA_VALUE, layout.key, e.key)) return false;
  w.end(k);
  if (withData && layout.data !== undefined) {
    if (e.value === undefined) return false;
    const d = w.begin(NFTA_SET_ELEM_DATA, true);
    if (layout.data[0].kind === "verdict") {
      const m = /^(drop|accept|continue|return|jump|goto)(?:\s+(\S+))?$/.exec(e.value.join(" "));
      if (m === null || (m[2] === undefined) !== (m[1] !== "jump" && m[1] !== "goto")) {
        return false;
      }
      const v = w.begin(NFTA_DATA_VERDICT, true);
      const code = new Uint8Array(4);
      new DataView(code.buffer).setInt32(0, VERDICTS[m[1]], false);
      w.attr(NFTA_VERDICT_CODE, code);
      if (m[2] !== undefined) w.strz(NFTA_VERDICT_CHAIN, m[2]);
      w.end(v);
    } else {
      if (!w.value(NFTA_DATA_VALUE, layout.data, e.value)) return false;
    }
    w.end(d);
  } else if (withData && e.value !== undefined) {
    return false; // a value for a set element
  }
  if (withData && e.comment !== undefined) {
    // One TLV: type, length with the NUL, the text, the NUL.
    const at = w.begin(NFTA_SET_ELEM_USERDATA, false);
    w.reserve(2);
    w.buf[w.off] = NFTNL_UDATA_SET_ELEM_COMMENT;
    const start = (w.off += 2);
    w.text(e.comment);
    const len = w.off - start + 1;
    if (len > 255) return false;
    w.buf[start - 1] = len;
    w.reserve(1);
    w.off++; // the NUL
    w.end(at);
  }
  w.end(el);
  return true;
}
