/**
 * Test support: decodes the bytes of an nf_tables element batch (what
 * codec.ts's `encodeBatch` builds and writer.ts sends) back into nft-like
 * lines, one per element, so golden tests check what is sent, byte for byte:
 *
 *   batch begin
 *   echo generation: table ip kube-proxy
 *   add element ip kube-proxy service-ips { 198.19.0.1 . tcp . 80 comment "a/b:p" : goto dnat-tcp-1 }
 *   batch end
 *
 * Anything unexpected (a key of the wrong size, unknown attributes, odd
 * flags, a gap in the sequence numbers, leftover bytes) shows up in the
 * text as a `?` note rather than being skipped, so a wrong encoding changes
 * the decoded text. Attributes are read with ffi/netlink/message.ts, keys
 * with element_get.ts's `decodeValue`, data and comments with its `elementOf`.
 *
 * @module
 */
import {
  attributeMap,
  attributes,
  HOST_LE,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_ECHO,
  NLM_F_REQUEST,
} from "../../netlink/message.ts";
import { decodeValue, elementOf } from "./element_get.ts";
import type { SetLayout } from "./codec.ts";
import {
  FAMILY_NAME,
  NFNL_MSG_BATCH_BEGIN,
  NFNL_MSG_BATCH_END,
  NFNL_SUBSYS_NFTABLES,
  NFT_MSG,
} from "./nf_tables.ts";

/** Netlink headers are in host order: true on little-endian hosts. */
const NLM_F_EXCL = 0x200;
const dec = new TextDecoder();

/** NFTA_SET_ELEM_* attributes the decoder knows (others are shown as `?attr`). */
const ELEM = { KEY: 1, DATA: 2, FLAGS: 3, TIMEOUT: 4, EXPIRATION: 5, USERDATA: 6 } as const;
const KNOWN = new Set<number>(Object.values(ELEM));

const hex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
const str = (b: Uint8Array | undefined) =>
  b === undefined ? "?" : dec.decode(b.indexOf(0) < 0 ? b : b.subarray(0, b.indexOf(0)));

/** A big-endian u64 attribute (timeouts, in ms) as a number. */
function u64(b: Uint8Array): number {
  const v = new DataView(b.buffer, b.byteOffset, b.length);
  return b.length === 8 ? Number(v.getBigUint64(0, false)) : -1;
}

/** The key of one element as nft prints it, or its raw bytes when it does not fit the layout. */
function keyText(a: Map<number, Uint8Array>, layout: SetLayout): string {
  const k = a.get(ELEM.KEY);
  const v = k === undefined ? undefined : attributeMap(k).get(1);
  if (v === undefined) return "?nokey";
  const parts = decodeValue(layout.key, v);
  return parts === undefined ? `?key 0x${hex(v)}` : parts.join(" . ");
}

/** One NFTA_LIST_ELEM as the text between the braces of an nft element line. */
export function elementText(el: Uint8Array, layout: SetLayout, set: string): string {
  const a = attributeMap(el);
  let out = keyText(a, layout);
  const e = elementOf(a, layout, { set }, []);
  const ud = a.get(ELEM.USERDATA);
  if (ud !== undefined) {
    // nft's layout: one TLV, type 0 (comment), length including the NUL.
    const exact = ud.length === 2 + ud[1] && ud[0] === 0 && ud[ud.length - 1] === 0;
    out += exact && e.comment !== undefined ? ` comment "${e.comment}"` : ` ?userdata 0x${hex(ud)}`;
  }
  const data = a.get(ELEM.DATA);
  if (data !== undefined) {
    out += e.value === undefined ? ` : ?data 0x${hex(data)}` : ` : ${e.value.join(" . ")}`;
  }
  const flags = a.get(ELEM.FLAGS);
  if (flags !== undefined) out += ` ?flags 0x${hex(flags)}`;
  const timeout = a.get(ELEM.TIMEOUT);
  if (timeout !== undefined) out += ` timeout ${u64(timeout)}ms`;
  const expires = a.get(ELEM.EXPIRATION);
  if (expires !== undefined) out += ` expires ${u64(expires)}ms`;
  attributes(el, 0, el.length, (type) => {
    if (!KNOWN.has(type)) out += ` ?attr${type}`;
  });
  return out;
}

/** The lines of one NEWSETELEM / DELSETELEM message's attributes. */
function elementLines(
  verb: string,
  family: string,
  body: Uint8Array,
  layoutOfSet: (name: string) => SetLayout | undefined,
): string[] {
  const a = attributeMap(body);
  const table = str(a.get(1)), set = str(a.get(2));
  const head = `${verb} element ${family} ${table} ${set}`;
  const layout = layoutOfSet(set);
  if (layout === undefined) return [`${head} ?unknown set layout`];
  const out: string[] = [];
  const list = a.get(3);
  if (list === undefined) return [`${head} ?no element list`];
  attributes(list, 0, list.length, (type, el) => {
    out.push(
      type === 1 ? `${head} { ${elementText(el, layout, set)} }` : `${head} ?list attr${type}`,
    );
  });
  for (const t of a.keys()) if (t < 1 || t > 3) out.push(`${head} ?attr${t}`);
  return out;
}

/** The no-op NEWTABLE that asks for the commit's generation id back (codec.ts). */
function echoLine(flags: number, family: string, bytes: Uint8Array, off: number, len: number) {
  let name = "",
    notes = flags === (NLM_F_REQUEST | NLM_F_ECHO) ? "" : ` ?flags 0x${flags.toString(16)}`;
  attributes(bytes, off + 20, off + len, (type, value) => {
    if (type === 1) name = new TextDecoder().decode(value.subarray(0, value.indexOf(0)));
    else notes += ` ?attr${type}`;
  });
  return `echo generation: table ${family} ${name}${notes}`;
}

/** The verb an element message's type and flags amount to, with a note on unexpected flags. */
function verbOf(msg: number, flags: number): string {
  const base = NLM_F_REQUEST | NLM_F_ACK;
  if (msg === NFT_MSG.DELSETELEM) {
    return flags === base ? "delete" : `delete ?flags 0x${flags.toString(16)}`;
  }
  if (flags === (base | NLM_F_CREATE)) return "add";
  if (flags === (base | NLM_F_CREATE | NLM_F_EXCL)) return "create";
  return `add ?flags 0x${flags.toString(16)}`;
}

/**
 * The lines a batch's bytes decode to: `batch begin`, one line per element
 * (`add element ip kube-proxy set { key comment "c" : value }`, in
 * script.ts's order), `batch end`,
 * with `?` notes for anything the production encoder should not produce.
 * `layoutOfSet` gives each set's layout (as the writer learned it).
 */
export function decodeBatch(
  bytes: Uint8Array,
  layoutOfSet: (name: string) => SetLayout | undefined,
): string[] {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const out: string[] = [];
  let off = 0, lastSeq: number | undefined;
  for (; off + 20 <= bytes.length;) {
    const len = v.getUint32(off, HOST_LE), type = v.getUint16(off + 4, HOST_LE);
    const flags = v.getUint16(off + 6, HOST_LE), seq = v.getUint32(off + 8, HOST_LE);
    if (len < 20 || off + len > bytes.length) break;
    if (lastSeq !== undefined && seq !== lastSeq + 1) out.push(`?seq ${seq} after ${lastSeq}`);
    lastSeq = seq;
    const family = bytes[off + 16], resId = v.getUint16(off + 18, false);
    if (type === NFNL_MSG_BATCH_BEGIN || type === NFNL_MSG_BATCH_END) {
      const ok = resId === NFNL_SUBSYS_NFTABLES && flags === NLM_F_REQUEST && len === 20;
      out.push(`batch ${type === NFNL_MSG_BATCH_BEGIN ? "begin" : "end"}${ok ? "" : " ?header"}`);
    } else if (type === ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG.NEWTABLE)) {
      out.push(echoLine(flags, FAMILY_NAME[family] ?? `?family${family}`, bytes, off, len));
    } else if (type >> 8 === NFNL_SUBSYS_NFTABLES) {
      const msg = type & 0xff;
      const verb = msg === NFT_MSG.NEWSETELEM || msg === NFT_MSG.DELSETELEM
        ? verbOf(msg, flags)
        : undefined;
      const fam = FAMILY_NAME[family] ?? `?family${family}`;
      const body = bytes.subarray(off + 20, off + len);
      out.push(
        ...(verb === undefined
          ? [`?nft message ${msg}`]
          : elementLines(verb, fam, body, layoutOfSet)),
      );
    } else {
      out.push(`?message type 0x${type.toString(16)}`);
    }
    off += (len + 3) & ~3;
  }
  if (off !== bytes.length) out.push(`?${bytes.length - off} trailing bytes`);
  return out;
}
