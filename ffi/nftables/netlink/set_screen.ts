/**
 * Screens set userdata that would crash libnftables 1.0.x.
 *
 * libnftables fills its cache with every set of every table in the network
 * namespace before it runs almost any command (`add rule`, `add element`,
 * `delete table`, `get element`, unfiltered `list sets`), and it decodes each
 * set's userdata (NFTA_SET_USERDATA) on the way. Up to 1.0.x that decoder
 * trusts the `typeof` annotation: an expression type it does not know, or
 * one that cannot be read back from userdata, is a NULL function call
 * (segfault). Newer nft versions write such annotations (kubernetes issue
 * 136786: a set written by nft 1.1.3 crashed the nft 1.0.x in kube-proxy's
 * image). Since this agent runs libnftables in its own process, such a set in
 * ANY table of the node would kill the agent on every sync.
 *
 * {@link udataHazard} replays 1.0.6's decoding (netlink.c `set_make_key`,
 * expression.c `concat_expr_parse_udata`) and says why a userdata blob would
 * crash it, or undefined when it decodes (or is rejected cleanly, which
 * libnftables reports as "Cannot parse userdata" and survives). The
 * expression types it accepts are those 1.0.6 itself writes and reads back
 * (captured in set_screen_test.ts). Values inside a known expression are not
 * range-checked.
 *
 * Also here, pure: the GETSET dump request and reply parsing, and a
 * DELTABLE batch (what `--cleanup` sends when libnftables cannot be used).
 *
 * @module
 */
import type { Batch } from "./codec.ts";
import { cstr, walkDump } from "../../netlink/dump.ts";
import { align4, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, putHeader } from "../../netlink/message.ts";
import { FAMILY_NAME, FAMILY_NUMBER, NFT_MSG, nftType, putBatchMark } from "./nf_tables.ts";

/** Expression types (nftables' enum expr_types) whose userdata 1.0.6 can decode. */
const DECODABLE = new Set([
  7, // payload
  8, // exthdr
  9, // meta
  10, // socket
  11, // osf
  12, // ct
  13, // concat
  23, // numgen
  24, // hash
  25, // rt
  26, // fib
  27, // xfrm
]);
const CONCAT = 13;
/** NFTNL_UDATA_SET_KEY_CONCAT_NEST_MAX in libnftnl 1.2. */
const CONCAT_NEST_MAX = 16;

interface Tlv {
  type: number;
  value: Uint8Array;
}

/** The TLVs of a udata blob (1-byte type, 1-byte length), or a reason when one runs past the end. */
function tlvs(buf: Uint8Array): Tlv[] | string {
  const out: Tlv[] = [];
  for (let off = 0; off < buf.length;) {
    if (off + 2 > buf.length) return `a userdata attribute header runs past the end (${off})`;
    const len = buf[off + 1];
    if (off + 2 + len > buf.length) {
      return `userdata attribute ${buf[off]} (${len} bytes) runs past the end`;
    }
    out.push({ type: buf[off], value: buf.subarray(off + 2, off + 2 + len) });
    off += 2 + len;
  }
  return out;
}

const u32 = (v: Uint8Array) => new DataView(v.buffer, v.byteOffset, 4).getUint32(0, true);

/** Why decoding one expression's udata (type + data) would crash 1.0.6, or undefined. */
function expressionHazard(etype: number, data: Uint8Array, nested: boolean): string | undefined {
  if (!DECODABLE.has(etype) || (nested && etype === CONCAT)) {
    return `its typeof annotation names expression type ${etype}, which libnftables 1.0.x ` +
      `cannot read back (a NULL decoder)`;
  }
  const inner = tlvs(data);
  if (typeof inner === "string") return inner;
  if (etype !== CONCAT) return undefined;
  // concat_parse_udata_nested: a bad entry aborts cleanly; then each entry in order.
  const entries: Uint8Array[] = [];
  for (const t of inner) {
    if (t.type >= CONCAT_NEST_MAX || t.value.length <= 4) return undefined;
    entries[t.type] = t.value;
  }
  for (let i = 0; i < entries.length && entries[i] !== undefined; i++) {
    const attrs = tlvs(entries[i]);
    if (typeof attrs === "string") return attrs;
    let sub: number | undefined;
    let subData: Uint8Array | undefined;
    for (const a of attrs) {
      if (a.type === 0) {
        if (a.value.length !== 4) return undefined;
        sub = u32(a.value);
      } else if (a.type === 1) {
        if (a.value.length <= 4) return undefined;
        subData = a.value;
      }
    }
    if (sub === undefined || subData === undefined) {
      return `its typeof concatenation entry ${i} lacks a type or data (read through NULL)`;
    }
    const h = expressionHazard(sub, subData, true);
    if (h !== undefined) return h;
  }
  return undefined;
}

/** set_make_key: why a KEY_TYPEOF / DATA_TYPEOF attribute would crash 1.0.6, or undefined. */
function typeofHazard(value: Uint8Array): string | undefined {
  const attrs = tlvs(value);
  if (typeof attrs === "string") return attrs;
  let etype: number | undefined;
  let data: Uint8Array | undefined;
  for (const a of attrs) {
    if (a.type === 0) {
      if (a.value.length !== 4) return undefined; // parse error: the annotation is ignored
      etype = u32(a.value);
    } else if (a.type === 1) {
      // Shorter than 3 bytes: a parse error, so the annotation is ignored (nft 1.0.6 writes an
      // empty one for a vmap's verdict data, and reads its own tables back fine).
      if (a.value.length < 3) return undefined;
      data = a.value;
    }
  }
  if (etype === undefined || data === undefined) return undefined;
  return expressionHazard(etype, data, false);
}

/**
 * Why libnftables 1.0.x would crash decoding this set userdata, or undefined
 * when it decodes it (or rejects it without crashing).
 */
export function udataHazard(udata: Uint8Array): string | undefined {
  const attrs = tlvs(udata);
  if (typeof attrs === "string") return attrs;
  const typeofs: Uint8Array[] = [];
  // set_parse_udata_cb, in order: the first malformed attribute aborts the parse cleanly.
  for (const a of attrs) {
    const len = a.value.length;
    switch (a.type) {
      case 0: // KEYBYTEORDER
      case 1: // DATABYTEORDER
      case 2: // MERGE_ELEMENTS
      case 6: // DATA_INTERVAL
        if (len !== 4) return undefined;
        break;
      case 3: // KEY_TYPEOF
      case 4: // DATA_TYPEOF
        if (len < 3) return undefined;
        typeofs.push(a.value);
        break;
      case 7: // COMMENT
        if (len === 0 || a.value[len - 1] !== 0) return undefined;
        break;
    }
  }
  for (const t of typeofs) {
    const h = typeofHazard(t);
    if (h !== undefined) return h;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Netlink: the set dump and a table delete

const NFTA_SET_TABLE = 1;
const NFTA_SET_NAME = 2;
const NFTA_SET_USERDATA = 13;
const NFTA_TABLE_NAME = 1;

/** A set as the dump shows it. */
export interface DumpedSet {
  /** nft family name ("ip", "inet", ...). */
  family: string;
  /** The table the set is in. */
  table: string;
  /** The set's name. */
  name: string;
  /** NFTA_SET_USERDATA as dumped, when the set has any. */
  userdata?: Uint8Array;
}

/** NFT_MSG_GETSET with NLM_F_DUMP for every family (nfgenmsg family AF_UNSPEC). */
export function encodeSetDumpRequest(seq: number): Uint8Array {
  const b = new Uint8Array(20);
  const type = nftType(NFT_MSG.GETSET);
  putHeader(new DataView(b.buffer), 0, 20, type, NLM_F_REQUEST | NLM_F_DUMP, seq, 0);
  return b;
}

/**
 * Reads the messages of one receive buffer of a set dump. Returns "done" at
 * NLMSG_DONE, an errno (> 0) at an error, else "more".
 */
export function parseSetDump(
  buf: Uint8Array,
  len: number,
  onSet: (s: DumpedSet) => void,
): "more" | "done" | number {
  return walkDump(buf, len, (type, family, attrs) => {
    if ((type & 0xff) !== NFT_MSG.NEWSET) return;
    const s: DumpedSet = { family: FAMILY_NAME[family] ?? `family ${family}`, table: "", name: "" };
    attrs((atype, value) => {
      if (atype === NFTA_SET_TABLE) s.table = cstr(value);
      else if (atype === NFTA_SET_NAME) s.name = cstr(value);
      else if (atype === NFTA_SET_USERDATA) s.userdata = value.slice();
    });
    onSet(s);
  });
}

/** A batch deleting table `family table` (NFT_MSG_DELTABLE), acked. */
export function encodeDeleteTable(family: string, table: string, seq0: number): Batch {
  const fam = FAMILY_NUMBER[family];
  if (fam === undefined) throw new TypeError(`unsupported family ${family}`);
  const name = new TextEncoder().encode(table);
  const attrLen = 4 + name.length + 1;
  const attrPadded = align4(attrLen);
  const bytes = new Uint8Array(20 + 20 + attrPadded + 20);
  const view = new DataView(bytes.buffer);
  putBatchMark(view, 0, "begin", seq0);
  const type = nftType(NFT_MSG.DELTABLE);
  putHeader(view, 20, 20 + attrPadded, type, NLM_F_REQUEST | NLM_F_ACK, seq0 + 1, fam);
  view.setUint16(40, attrLen, true);
  view.setUint16(42, NFTA_TABLE_NAME, true);
  bytes.set(name, 44);
  const end = 40 + attrPadded;
  putBatchMark(view, end, "end", seq0 + 2);
  return { bytes, seqs: [seq0 + 1], firstOp: [0], elements: 0 };
}
