/**
 * This host's interface addresses over rtnetlink (NETLINK_ROUTE), no `ip` binary: one
 * RTM_GETADDR dump ({@link interfaceAddresses}), and a socket subscribed to the IPv4/IPv6
 * address groups that says whether anything changed since it was last asked
 * ({@link AddressChanges}). The message parsing ({@link parseAddrMessages}) is pure.
 *
 * @module
 */
import { EAGAIN, EINTR } from "../errno.ts";
import { lastErrno, libc, strerror } from "../libc.ts";
import { formatIP } from "../../net/ip.ts";
import { libmnl } from "./libmnl.ts";
import { attributes, NLM_F_DUMP, NLM_F_REQUEST, NLMSG_HDRLEN, putHeader } from "./message.ts";
import { walkMessages } from "./dump.ts";
import { netfilterDump, openNetlink } from "./socket.ts";

/** The rtnetlink bus. */
export const NETLINK_ROUTE = 0;
/** nlmsg_type of an address report (dump reply or notification). */
export const RTM_NEWADDR = 20;
/** nlmsg_type of an address removal notification. */
export const RTM_DELADDR = 21;
/** nlmsg_type of an address dump request. */
export const RTM_GETADDR = 22;
/** Multicast group (bind(2) bitmask) of IPv4 address changes. */
export const RTMGRP_IPV4_IFADDR = 0x10;
/** Multicast group (bind(2) bitmask) of IPv6 address changes; see {@link RTMGRP_IPV4_IFADDR}. */
export const RTMGRP_IPV6_IFADDR = 0x100;
const IFADDRMSG_LEN = 8;
const IFA_ADDRESS = 1;
const IFA_LOCAL = 2;
const AF_INET = 2, AF_INET6 = 10;
const ENOBUFS = 105;
const F_GETFL = 3, F_SETFL = 4, O_NONBLOCK = 0o4000;

/** An RTM_GETADDR dump request for every family (struct ifaddrmsg, all zero). */
export function getAddrRequest(seq = 1): Uint8Array {
  const len = NLMSG_HDRLEN + IFADDRMSG_LEN;
  const buf = new Uint8Array(len);
  putHeader(new DataView(buf.buffer), 0, len, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, seq);
  return buf;
}

/**
 * Calls `onAddr(type, address)` for each RTM_NEWADDR / RTM_DELADDR message in `buf[0, len)`:
 * the interface's own address (IFA_LOCAL, else IFA_ADDRESS: on a point-to-point link
 * IFA_ADDRESS is the peer), as canonical text. Returns "done" at NLMSG_DONE, an errno (> 0) at
 * an error report, else "more".
 */
export function parseAddrMessages(
  buf: Uint8Array,
  len: number,
  onAddr: (type: number, address: string) => void,
): "more" | "done" | number {
  return walkMessages(buf, len, (type, off, end) => {
    const body = off + NLMSG_HDRLEN;
    if ((type !== RTM_NEWADDR && type !== RTM_DELADDR) || end - body < IFADDRMSG_LEN) return;
    const fam = buf[body];
    const size = fam === AF_INET ? 4 : fam === AF_INET6 ? 16 : 0;
    let local: Uint8Array | undefined, address: Uint8Array | undefined;
    attributes(buf, body + IFADDRMSG_LEN, end, (t, v) => {
      if (t === IFA_LOCAL) local = v;
      if (t === IFA_ADDRESS) address = v;
    });
    const raw = local ?? address;
    if (size > 0 && raw !== undefined && raw.length === size) {
      onAddr(type, formatIP({ family: size === 4 ? 4 : 6, bytes: raw.slice() }));
    }
  });
}

/**
 * Every IPv4 and IPv6 address on this host's interfaces (all of them, loopback included, as
 * Go's net.InterfaceAddrs lists them), sorted, without duplicates. A few ms.
 *
 * @throws Error on a netlink failure; LibraryNotFoundError without libmnl.
 */
export function interfaceAddresses(): string[] {
  const out = new Set<string>();
  netfilterDump(
    "address",
    getAddrRequest(),
    (buf, len) =>
      parseAddrMessages(buf, len, (type, a) => {
        if (type === RTM_NEWADDR) out.add(a);
      }),
    NETLINK_ROUTE,
  );
  return [...out].sort();
}

/**
 * A non-blocking rtnetlink socket subscribed to address changes of both families. Reading it
 * costs one recv(2) that returns EAGAIN while nothing changed.
 */
export class AddressChanges {
  #nl: Deno.PointerValue;
  #rx = new Uint8Array(1 << 16);

  /** @throws Error when the socket cannot be opened; LibraryNotFoundError without libmnl. */
  constructor() {
    const { nl, fd } = openNetlink(NETLINK_ROUTE, {
      timeoutSec: 1,
      groups: RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR,
    });
    const c = libc();
    const flags = c.fcntl(fd, F_GETFL, 0);
    if (flags < 0 || c.fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      const why = strerror(lastErrno());
      libmnl().mnl_socket_close(nl);
      throw new Error(`netlink O_NONBLOCK: ${why}`);
    }
    this.#nl = nl;
  }

  /**
   * Reads every notification waiting; true when any address was added or removed since the
   * last call. A receive queue overflow (ENOBUFS: notifications were lost) counts as a change.
   */
  drain(): boolean {
    if (this.#nl === null) return false;
    const mnl = libmnl();
    let changed = false;
    for (;;) {
      const got = Number(mnl.mnl_socket_recvfrom(this.#nl, this.#rx, BigInt(this.#rx.length)));
      if (got < 0) {
        const e = lastErrno();
        if (e === EAGAIN) return changed;
        if (e === EINTR) continue;
        if (e === ENOBUFS) {
          changed = true;
          continue;
        }
        throw new Error(`netlink address notifications: ${strerror(e)}`);
      }
      parseAddrMessages(this.#rx, got, () => changed = true);
    }
  }

  /** Closes the socket; {@link drain} then reports nothing. */
  close(): void {
    if (this.#nl !== null) libmnl().mnl_socket_close(this.#nl);
    this.#nl = null;
  }
}
