/**
 * The netlink port ids of this process's own sockets of one protocol,
 * libnftables' too (it opens its socket inside its context and says nothing
 * of it): getsockname(2) on every open descriptor. Deno refuses /proc/self
 * to a program without --allow-all, so /proc/self/fd is not an option.
 *
 * @module
 */
import { lastErrno, libc } from "../libc.ts";

const AF_NETLINK = 16;
const SOL_SOCKET = 1, SO_PROTOCOL = 38;
const EBADF = 9;
/** Descriptors scanned at most, and the run of closed ones after which the scan stops. */
const FD_MAX = 4096, CLOSED_RUN = 256;

/**
 * The port id in a `struct sockaddr_nl` (family u16, pad u16, pid u32, groups
 * u32) of `len` bytes, or undefined when it is not a netlink address.
 */
export function netlinkPortid(addr: Uint8Array, len: number): number | undefined {
  if (len < 12) return undefined;
  const dv = new DataView(addr.buffer, addr.byteOffset, addr.length);
  return dv.getUint16(0, true) === AF_NETLINK ? dv.getUint32(4, true) : undefined;
}

/** Port ids of this process's netlink sockets of `protocol` (a few µs per open descriptor). */
export function ownPortids(protocol: number): Set<number> {
  const c = libc();
  const out = new Set<number>();
  const addr = new Uint8Array(128), alen = new Uint32Array(1);
  const proto = new Int32Array(1), plen = new Uint32Array(1);
  for (let fd = 0, closed = 0; fd < FD_MAX && closed < CLOSED_RUN; fd++) {
    alen[0] = addr.length;
    if (c.getsockname(fd, addr, new Uint8Array(alen.buffer)) < 0) {
      closed = lastErrno() === EBADF ? closed + 1 : 0;
      continue;
    }
    closed = 0;
    const portid = netlinkPortid(addr, alen[0]);
    if (portid === undefined) continue;
    plen[0] = 4;
    const ok = c.getsockopt(
      fd,
      SOL_SOCKET,
      SO_PROTOCOL,
      new Uint8Array(proto.buffer),
      new Uint8Array(plen.buffer),
    );
    if (ok === 0 && proto[0] === protocol) out.add(portid);
  }
  return out;
}
