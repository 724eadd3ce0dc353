/**
 * Walking a netlink dump reply: its messages up to NLMSG_DONE or an error,
 * and the attributes of one nfnetlink message. Pure; the set and rule dumps
 * share it.
 *
 * @module
 */

const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
/** nlmsghdr (16 bytes) plus nfgenmsg (4 bytes): where a message's attributes start. */
const ATTRS_AT = 20;

/**
 * Calls `onMessage(type, attrs)` for every nfnetlink message of one receive buffer, `attrs`
 * walking that message's top-level attributes. Returns "done" at NLMSG_DONE, an errno (> 0) at an
 * error message, else "more" (the dump goes on in the next buffer).
 */
export function walkDump(
  buf: Uint8Array,
  len: number,
  onMessage: (type: number, family: number, attrs: (onAttr: AttrFn) => void) => void,
): "more" | "done" | number {
  const view = new DataView(buf.buffer, buf.byteOffset, len);
  for (let off = 0; off + 16 <= len;) {
    const mlen = view.getUint32(off, true);
    const type = view.getUint16(off + 4, true);
    if (mlen < 16 || off + mlen > len) break;
    if (type === NLMSG_DONE) return "done";
    if (type === NLMSG_ERROR) {
      const err = view.getInt32(off + 16, true);
      return err === 0 ? "done" : -err;
    }
    if (mlen >= ATTRS_AT) {
      const start = off + ATTRS_AT, end = off + mlen;
      onMessage(type, buf[off + 16], (onAttr) => attributes(buf, view, start, end, onAttr));
    }
    off += (mlen + 3) & ~3;
  }
  return "more";
}

/** Receives one attribute: its type (flags masked off) and its value (a view into the buffer). */
export type AttrFn = (type: number, value: Uint8Array) => void;

function attributes(buf: Uint8Array, view: DataView, start: number, end: number, onAttr: AttrFn) {
  for (let a = start; a + 4 <= end;) {
    const alen = view.getUint16(a, true);
    const atype = view.getUint16(a + 2, true) & 0x7fff;
    if (alen < 4 || a + alen > end) break;
    onAttr(atype, buf.subarray(a + 4, a + alen));
    a += (alen + 3) & ~3;
  }
}

const dec = new TextDecoder();

/** A NUL-terminated string attribute. */
export function cstr(v: Uint8Array): string {
  const nul = v.indexOf(0);
  return dec.decode(nul < 0 ? v : v.subarray(0, nul));
}
