/**
 * Walking a netlink dump reply: its messages up to NLMSG_DONE or an error,
 * and the attributes of each nfnetlink message. Pure; the nf_tables set,
 * rule and element reads share it.
 *
 * @module
 */
import {
  align4,
  type AttrFn,
  attributes,
  errnoAt,
  NFNL_HDRLEN,
  NLMSG_DONE,
  NLMSG_HDRLEN,
} from "./message.ts";

export { type AttrFn, cstr } from "./message.ts";

/**
 * Calls `onMessage(type, start, end)` for every netlink message of one receive buffer (`start`
 * at its header, `end` past its last byte). Returns "done" at NLMSG_DONE, an errno (> 0) at an
 * error message, else "more" (the dump goes on in the next buffer).
 */
export function walkMessages(
  buf: Uint8Array,
  len: number,
  onMessage: (type: number, start: number, end: number) => void,
): "more" | "done" | number {
  const view = new DataView(buf.buffer, buf.byteOffset, len);
  for (let off = 0; off + NLMSG_HDRLEN <= len;) {
    const mlen = view.getUint32(off, true);
    const type = view.getUint16(off + 4, true);
    if (mlen < NLMSG_HDRLEN || off + mlen > len) break;
    if (type === NLMSG_DONE) return "done";
    const errno = errnoAt(view, off);
    if (errno !== undefined) return errno === 0 ? "done" : errno;
    onMessage(type, off, off + mlen);
    off += align4(mlen);
  }
  return "more";
}

/**
 * Calls `onMessage(type, family, attrs)` for every nfnetlink message of one receive buffer,
 * `attrs` walking that message's top-level attributes; returns as {@link walkMessages}.
 */
export function walkDump(
  buf: Uint8Array,
  len: number,
  onMessage: (type: number, family: number, attrs: (onAttr: AttrFn) => void) => void,
): "more" | "done" | number {
  return walkMessages(buf, len, (type, off, end) => {
    if (end - off < NFNL_HDRLEN) return;
    onMessage(type, buf[off + 16], (onAttr) => attributes(buf, off + NFNL_HDRLEN, end, onAttr));
  });
}
