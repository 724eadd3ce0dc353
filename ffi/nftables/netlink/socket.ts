/**
 * A NETLINK_NETFILTER socket (through libmnl, ../../netlink/libmnl.ts) that sends one nf_tables batch and collects its acks. The send
 * runs on a worker thread (`nonblocking`): the kernel applies the batch
 * inside the call, which takes ~0.15 s for 50k elements, and the event loop
 * must keep serving meanwhile.
 *
 * @module
 */
import { lastErrno, libc, strerror } from "../../libc.ts";
import { libmnl } from "../../netlink/libmnl.ts";
import { type Batch, parseAcks } from "./codec.ts";

const NETLINK_NETFILTER = 12;
const SOL_SOCKET = 1;
const SO_SNDBUFFORCE = 32;
const SO_RCVBUFFORCE = 33;
const SO_RCVTIMEO = 20;
const SOL_NETLINK = 270;
const NETLINK_CAP_ACK = 10;
const EINTR = 4;
const RX = 1 << 18;

/** The text of an errno, as strerror(3) says it (the words libnftables errors use too). */
export function errnoText(errno: number): string {
  return strerror(errno);
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
    const mnl = libmnl(), c = libc();
    const nl = mnl.mnl_socket_open(NETLINK_NETFILTER);
    if (nl === null) throw new Error(`netlink socket: ${errnoText(lastErrno())}`);
    if (mnl.mnl_socket_bind(nl, 0, 0) < 0) {
      const why = errnoText(lastErrno());
      mnl.mnl_socket_close(nl);
      throw new Error(`netlink bind: ${why}`);
    }
    this.#nl = nl;
    this.#fd = mnl.mnl_socket_get_fd(nl);
    // Acks without the echoed request; never wait forever for one.
    c.setsockopt(this.#fd, SOL_NETLINK, NETLINK_CAP_ACK, new Int32Array([1]), 4);
    c.setsockopt(this.#fd, SOL_SOCKET, SO_RCVBUFFORCE, new Int32Array([4 << 20]), 4);
    c.setsockopt(this.#fd, SOL_SOCKET, SO_RCVTIMEO, new BigInt64Array([10n, 0n]), 16);
  }

  /** Sends a batch (one skb: the kernel applies all of it or none) and reads its acks. */
  async send(batch: Batch): Promise<BatchResult> {
    const mnl = libmnl(), c = libc();
    if (batch.bytes.length > this.#sndbuf) {
      // A batch must fit the send buffer whole (netlink takes one skb).
      this.#sndbuf = batch.bytes.length + (1 << 16);
      c.setsockopt(this.#fd, SOL_SOCKET, SO_SNDBUFFORCE, new Int32Array([this.#sndbuf]), 4);
    }
    const sent = Number(
      await mnl.mnl_socket_sendto_async(this.#nl, batch.bytes, BigInt(batch.bytes.length)),
    );
    if (sent < 0) throw new Error(`netlink send: ${errnoText(lastErrno())}`);
    const acks = new Map<number, number>();
    const view = new DataView(this.#rx.buffer);
    while (acks.size < batch.seqs.length) {
      const got = Number(mnl.mnl_socket_recvfrom(this.#nl, this.#rx, BigInt(RX)));
      if (got < 0) {
        const e = lastErrno();
        if (e === EINTR) continue;
        throw new Error(`netlink receive: ${errnoText(e)}`);
      }
      parseAcks(view, got, (seq, err) => {
        if (!acks.has(seq) || err !== 0) acks.set(seq, err);
      });
      // An error aborts the batch: the kernel may not answer the rest.
      if ([...acks.values()].some((e) => e !== 0)) break;
    }
    return { acks };
  }

  close(): void {
    if (this.#nl !== null) libmnl().mnl_socket_close(this.#nl);
    this.#nl = null;
  }
}

/**
 * Sends one NLM_F_DUMP request over a fresh NETLINK_NETFILTER socket and feeds
 * every receive buffer to `parse` until it says "done" (or an errno).
 * Synchronous: a dump of sets or of one table's rules takes a few ms.
 */
export function netfilterDump(
  what: string,
  request: Uint8Array,
  parse: (buf: Uint8Array, len: number) => "more" | "done" | number,
): void {
  const mnl = libmnl(), c = libc();
  const nl = mnl.mnl_socket_open(NETLINK_NETFILTER);
  if (nl === null) throw new Error(`netlink socket: ${errnoText(lastErrno())}`);
  try {
    if (mnl.mnl_socket_bind(nl, 0, 0) < 0) {
      throw new Error(`netlink bind: ${errnoText(lastErrno())}`);
    }
    const fd = mnl.mnl_socket_get_fd(nl);
    // Never wait forever for the rest of a dump.
    c.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, new BigInt64Array([5n, 0n]), 16);
    if (Number(mnl.mnl_socket_sendto(nl, request, BigInt(request.length))) < 0) {
      throw new Error(`netlink send: ${errnoText(lastErrno())}`);
    }
    const rx = new Uint8Array(1 << 16);
    for (;;) {
      const got = Number(mnl.mnl_socket_recvfrom(nl, rx, BigInt(rx.length)));
      if (got < 0) {
        const e = lastErrno();
        if (e === EINTR) continue;
        throw new Error(`netlink ${what} dump: ${errnoText(e)}`);
      }
      const r = parse(rx, got);
      if (r === "done") return;
      if (typeof r === "number") throw new Error(`netlink ${what} dump: ${errnoText(r)}`);
    }
  } finally {
    mnl.mnl_socket_close(nl);
  }
}
