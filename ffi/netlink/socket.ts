/**
 * NETLINK_NETFILTER sockets through libmnl (libmnl.ts), for the nf_tables
 * and ctnetlink paths alike: {@link openNetfilter} opens one with the
 * options both want; {@link NetfilterSocket} sends one acked batch and
 * collects its acks, on a worker thread (`nonblocking`: the kernel applies
 * an nf_tables batch inside the call, ~0.15 s for 50k elements, and the
 * event loop must keep serving meanwhile); {@link netfilterDump} runs one
 * dump request.
 *
 * @module
 */
import { EINTR } from "../errno.ts";
import { lastErrno, libc, strerror } from "../libc.ts";
import { libmnl } from "./libmnl.ts";
import { NETLINK_NETFILTER, parseAcks } from "./message.ts";

const SOL_SOCKET = 1;
const SO_SNDBUFFORCE = 32;
const SO_RCVBUFFORCE = 33;
const SO_RCVTIMEO = 20;
const SOL_NETLINK = 270;
const NETLINK_CAP_ACK = 10;
const RX = 1 << 18;
/** Batches up to this size are sent on the calling thread. */
const SMALL_BATCH = 16 << 10;

/** Options of {@link openNetfilter}. */
export interface OpenOptions {
  /** Seconds a receive may wait before it fails with EAGAIN: never wait forever for a reply. */
  timeoutSec: number;
  /** Receive buffer size, forced past rmem_max (needs CAP_NET_ADMIN). */
  rcvbuf?: number;
  /** Error reports without the echoed request payload (NETLINK_CAP_ACK). */
  capAck?: boolean;
}

/** An open, bound NETLINK_NETFILTER socket. */
export interface OpenSocket {
  /** libmnl's `struct mnl_socket *`. */
  nl: Deno.PointerObject;
  /** Its file descriptor. */
  fd: number;
}

/**
 * Opens and binds a NETLINK_NETFILTER socket.
 *
 * @throws Error naming the failed step and strerror's text; LibraryNotFoundError without libmnl.
 */
export function openNetfilter(opts: OpenOptions): OpenSocket {
  return openNetlink(NETLINK_NETFILTER, opts);
}

/**
 * Opens a socket on netlink bus `bus` (NETLINK_ROUTE for rtnetlink, NETLINK_NETFILTER) and binds
 * it, to the multicast `groups` (a bitmask of RTMGRP_* and the like) when given.
 *
 * @throws Error naming the failed step and strerror's text; LibraryNotFoundError without libmnl.
 */
export function openNetlink(bus: number, opts: OpenOptions & { groups?: number }): OpenSocket {
  const mnl = libmnl(), c = libc();
  const nl = mnl.mnl_socket_open(bus);
  if (nl === null) throw new Error(`netlink socket: ${strerror(lastErrno())}`);
  if (mnl.mnl_socket_bind(nl, opts.groups ?? 0, 0) < 0) {
    const why = strerror(lastErrno());
    mnl.mnl_socket_close(nl);
    throw new Error(`netlink bind: ${why}`);
  }
  const fd = mnl.mnl_socket_get_fd(nl);
  if (opts.capAck) c.setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, new Int32Array([1]), 4);
  if (opts.rcvbuf !== undefined) {
    c.setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, new Int32Array([opts.rcvbuf]), 4);
  }
  c.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, new BigInt64Array([BigInt(opts.timeoutSec), 0n]), 16);
  return { nl, fd };
}

/** What {@link NetfilterSocket.send} sends: one batch and the seqs that must be acked. */
export interface AckedBatch {
  /** The encoded messages, batch begin and end included. */
  bytes: Uint8Array;
  /** Sequence numbers the kernel must acknowledge. */
  seqs: number[];
}

/** Per message of a batch, the errno the kernel reported (0: applied). */
export interface BatchResult {
  /** seq -> errno, for every acknowledged message. */
  acks: Map<number, number>;
}

/** One netlink socket for nf_tables batches. */
export class NetfilterSocket {
  #nl: Deno.PointerValue;
  #fd: number;
  #rx = new Uint8Array(RX);
  #sndbuf = 0;

  constructor() {
    const { nl, fd } = openNetfilter({ timeoutSec: 10, rcvbuf: 4 << 20, capAck: true });
    this.#nl = nl;
    this.#fd = fd;
  }

  /**
   * Sends a batch (one skb: the kernel applies all of it or none) and reads its acks;
   * `onReceive` sees every buffer read on the way (echoed notifications come before the acks).
   */
  async send(
    batch: AckedBatch,
    onReceive?: (buf: Uint8Array, len: number) => void,
  ): Promise<BatchResult> {
    const mnl = libmnl(), c = libc();
    if (batch.bytes.length > this.#sndbuf) {
      // A batch must fit the send buffer whole (netlink takes one skb).
      this.#sndbuf = batch.bytes.length + (1 << 16);
      c.setsockopt(this.#fd, SOL_SOCKET, SO_SNDBUFFORCE, new Int32Array([this.#sndbuf]), 4);
    }
    // A small batch (a change's few elements) is applied in well under a millisecond: handing
    // it to a worker thread would cost more than that (a wake-up of another CPU, then of ours).
    // One that creates a chain takes longer (a class chain's first use: ~40 ms at 30k
    // Services); the loop waits that long, as the sync would anyway.
    const sent = Number(
      batch.bytes.length <= SMALL_BATCH
        ? mnl.mnl_socket_sendto(this.#nl, batch.bytes, BigInt(batch.bytes.length))
        : await mnl.mnl_socket_sendto_async(this.#nl, batch.bytes, BigInt(batch.bytes.length)),
    );
    if (sent < 0) throw new Error(`netlink send: ${strerror(lastErrno())}`);
    const acks = new Map<number, number>();
    const view = new DataView(this.#rx.buffer);
    while (acks.size < batch.seqs.length) {
      const got = Number(mnl.mnl_socket_recvfrom(this.#nl, this.#rx, BigInt(RX)));
      if (got < 0) {
        const e = lastErrno();
        if (e === EINTR) continue;
        throw new Error(`netlink receive: ${strerror(e)}`);
      }
      onReceive?.(this.#rx, got);
      parseAcks(view, got, (seq, err) => {
        if (!acks.has(seq) || err !== 0) acks.set(seq, err);
      });
      // An error aborts the batch: the kernel may not answer the rest.
      if ([...acks.values()].some((e) => e !== 0)) break;
    }
    return { acks };
  }

  /** Closes the socket; the socket is not usable afterwards. */
  close(): void {
    if (this.#nl !== null) libmnl().mnl_socket_close(this.#nl);
    this.#nl = null;
  }
}

/**
 * Sends one NLM_F_DUMP request over a fresh NETLINK_NETFILTER (or `bus`) socket and feeds
 * every receive buffer to `parse` until it says "done" (or an errno).
 * Synchronous: a dump of sets or of one table's rules takes a few ms.
 */
export function netfilterDump(
  what: string,
  request: Uint8Array,
  parse: (buf: Uint8Array, len: number) => "more" | "done" | number,
  bus = NETLINK_NETFILTER,
): void {
  const mnl = libmnl();
  const { nl } = openNetlink(bus, { timeoutSec: 5 });
  try {
    if (Number(mnl.mnl_socket_sendto(nl, request, BigInt(request.length))) < 0) {
      throw new Error(`netlink send: ${strerror(lastErrno())}`);
    }
    const rx = new Uint8Array(1 << 16);
    for (;;) {
      const got = Number(mnl.mnl_socket_recvfrom(nl, rx, BigInt(rx.length)));
      if (got < 0) {
        const e = lastErrno();
        if (e === EINTR) continue;
        throw new Error(`netlink ${what} dump: ${strerror(e)}`);
      }
      const r = parse(rx, got);
      if (r === "done") return;
      if (typeof r === "number") throw new Error(`netlink ${what} dump: ${strerror(r)}`);
    }
  } finally {
    mnl.mnl_socket_close(nl);
  }
}
