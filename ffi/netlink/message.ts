/**
 * Netlink message framing shared by the nf_tables and ctnetlink paths
 * (linux/netlink.h, linux/netfilter/nfnetlink.h): the header, the 4-byte
 * alignment, attributes, and the ack parser that turns NLMSG_ERROR into an
 * errno. Pure: no FFI here (socket.ts sends and receives the bytes).
 *
 * @module
 */

/** Netlink headers are in host order: true on little-endian hosts (x86_64, arm64). */
/** Whether this host is little-endian: netlink headers are in host byte order. */
export const HOST_LE: boolean = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const LE = HOST_LE;

/** nlmsg_type of a no-op request (acked when asked: a fence). */
export const NLMSG_NOOP = 1;
/** nlmsg_type of an ack or error report (struct nlmsgerr). */
export const NLMSG_ERROR = 2;
/** nlmsg_type that ends a dump. */
export const NLMSG_DONE = 3;
/** nlmsg_flags: a request. */
export const NLM_F_REQUEST = 0x1;
/** nlmsg_flags: ask for an ack (else only failures are reported). */
export const NLM_F_ACK = 0x4;
/** nlmsg_flags: send the notifications this request causes back to the sender too. */
export const NLM_F_ECHO = 0x8;
/** nlmsg_flags: a dump (NLM_F_ROOT | NLM_F_MATCH). */
export const NLM_F_DUMP = 0x300;
/** nlmsg_flags: create the object. */
export const NLM_F_CREATE = 0x400;
/** nla_type bit of an attribute holding attributes. */
export const NLA_F_NESTED = 0x8000;
/** Size of struct nlmsghdr. */
export const NLMSG_HDRLEN = 16;
/** nlmsghdr plus nfgenmsg: where an nfnetlink message's attributes start. */
export const NFNL_HDRLEN = 20;
/** The netlink bus of nfnetlink (nf_tables and ctnetlink alike). */
export const NETLINK_NETFILTER = 12;

/** Rounds a length up to netlink's 4-byte alignment (NLMSG_ALIGN, NLA_ALIGN). */
export function align4(n: number): number {
  return (n + 3) & ~3;
}

/**
 * Writes an nlmsghdr at `off` (in host order) and, unless
 * `family` is undefined, the nfgenmsg after it (version 0, res_id big-endian).
 */
export function putHeader(
  dv: DataView,
  off: number,
  len: number,
  type: number,
  flags: number,
  seq: number,
  family?: number,
  resId = 0,
): void {
  dv.setUint32(off, len, LE);
  dv.setUint16(off + 4, type, LE);
  dv.setUint16(off + 6, flags, LE);
  dv.setUint32(off + 8, seq >>> 0, LE);
  dv.setUint32(off + 12, 0, LE); // to the kernel
  if (family === undefined) return;
  dv.setUint8(off + 16, family);
  dv.setUint8(off + 17, 0); // NFNETLINK_V0
  dv.setUint16(off + 18, resId, false);
}

/** Receives one attribute: its type (flags masked off) and its value (a view into the buffer). */
export type AttrFn = (type: number, value: Uint8Array) => void;

/** Calls `onAttr` for each attribute in `buf[start, end)`; stops at a malformed one. */
export function attributes(buf: Uint8Array, start: number, end: number, onAttr: AttrFn): void {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.length);
  for (let a = start; a + 4 <= end;) {
    const alen = view.getUint16(a, LE);
    const atype = view.getUint16(a + 2, LE) & ~NLA_F_NESTED & 0xffff;
    if (alen < 4 || a + alen > end) break;
    onAttr(atype, buf.subarray(a + 4, a + alen));
    a += align4(alen);
  }
}

/** The attributes in `buf[from, to)` by type (the last one of a type wins). */
export function attributeMap(
  buf: Uint8Array,
  from = 0,
  to = buf.length,
): Map<number, Uint8Array> {
  const out = new Map<number, Uint8Array>();
  attributes(buf, from, to, (type, value) => out.set(type, value));
  return out;
}

const dec = new TextDecoder();

/** A NUL-terminated string attribute. */
export function cstr(v: Uint8Array): string {
  const nul = v.indexOf(0);
  return dec.decode(nul < 0 ? v : v.subarray(0, nul));
}

/**
 * The errno of the NLMSG_ERROR message at `off` (0: an ack), or undefined
 * when that message is not one.
 */
export function errnoAt(dv: DataView, off: number): number | undefined {
  if (dv.getUint16(off + 4, LE) !== NLMSG_ERROR) return undefined;
  if (dv.getUint32(off, LE) < NLMSG_HDRLEN + 4) return undefined;
  return -dv.getInt32(off + NLMSG_HDRLEN, LE) | 0;
}

/**
 * Walks the messages in `dv[0, len)` and reports each ack or error report
 * (NLMSG_ERROR) as `(seq, errno)`, errno 0 meaning success; the seq is the
 * request's (the kernel copies it into the ack's header). Returns the number
 * of acks seen.
 *
 * @throws Error on a malformed buffer.
 */
export function parseAcks(
  dv: DataView,
  len: number,
  onAck: (seq: number, errno: number) => void,
): number {
  let acks = 0;
  for (let off = 0; off + NLMSG_HDRLEN <= len;) {
    const mlen = dv.getUint32(off, LE);
    if (mlen < NLMSG_HDRLEN || off + mlen > len) {
      throw new Error(`malformed netlink reply: message length ${mlen} at offset ${off} of ${len}`);
    }
    const errno = errnoAt(dv, off);
    if (errno !== undefined) {
      onAck(dv.getUint32(off + 8, LE), errno);
      acks++;
    }
    off += align4(mlen);
  }
  return acks;
}
