/**
 * A subscription to nf_tables change notifications (NFNLGRP_NFTABLES on a
 * NETLINK_NETFILTER socket), with this process's own changes told apart:
 *
 * - Every notification carries the port id of the socket that sent the batch.
 *   Our batches go out on our own sockets (the raw element writer's and the
 *   one libnftables opens inside its context), whose port ids
 *   ../../netlink/own_portids.ts finds with getsockname(2); own_sockets.ts
 *   keeps that set fresh (a cheap re-read, then a rate-limited full scan)
 *   when an unknown port id shows up.
 * - A socket filter (classic BPF on nlmsg_pid) drops our own notifications in
 *   the kernel, so a cold start's hundreds of thousands of element
 *   notifications neither reach the event loop nor overrun the socket.
 *
 * - Around a large batch of ours, the monitor leaves the group altogether
 *   ({@link NftablesMonitor.quiet}, generation.ts): the kernel then builds no
 *   message per element at all, and generation ids account for the gap.
 *
 * A poll(2) on a worker thread waits for the socket with a 1 s timeout (so
 * stopping takes at most that long, and an idle agent wakes once a second for
 * a few µs); the receives then run on the event loop's thread without
 * waiting, where errno (ENOBUFS: an overrun) can be read.
 *
 * @module
 */
import { EAGAIN, EINTR } from "../../errno.ts";
import { lastErrno, libc, strerror } from "../../libc.ts";
import { libmnl } from "../../netlink/libmnl.ts";
import { openNetfilter } from "../../netlink/socket.ts";
import { HOST_LE } from "../../netlink/message.ts";
import type { LogFn } from "../../../net/log.ts";
import { decodeNotifications, type NftNotification } from "./notify.ts";
import { QuietWindow, readGenerationId } from "./generation.ts";
import { OwnSockets } from "./own_sockets.ts";

export { OwnSockets } from "./own_sockets.ts";

const SOL_SOCKET = 1, SO_ATTACH_FILTER = 26;
const SOL_NETLINK = 270, NETLINK_ADD_MEMBERSHIP = 1, NETLINK_DROP_MEMBERSHIP = 2;
/** enum nfnetlink_groups: NFNLGRP_NFTABLES. */
export const NFNLGRP_NFTABLES = 7;
const ENOBUFS = 105;
const MSG_DONTWAIT = 0x40;
const POLLIN = 1;
const RX = 1 << 17;
/** A filter jumps at most 255 instructions: more own sockets than this are not filtered. */
const FILTER_MAX = 200;

/** What a {@link NftablesMonitor} reports. */
export interface MonitorHandlers {
  /** Notifications of one receive that other programs caused (never empty). */
  onForeign(msgs: NftNotification[]): void;
  /**
   * Notifications were lost (the socket overran, or commits happened during a quiet window
   * that were not ours: `why`); anything may have changed.
   */
  onOverrun(why?: string): void;
  /** The monitor stopped on an error it cannot recover from. */
  onError?(err: Error): void;
}

const swap32 = (x: number) =>
  (((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24)) >>> 0;

/**
 * The classic BPF program that drops skbs whose (first) message came from one
 * of `portids`: `ld [12]` loads nlmsg_pid (network order, so compared
 * byte-swapped on little-endian hosts), one `jeq` each, accept, drop.
 */
export function ownPortidFilter(portids: Iterable<number>): Uint8Array {
  const ids = [...portids].slice(0, FILTER_MAX);
  const n = ids.length;
  const prog = new Uint8Array((n + 3) * 8);
  const dv = new DataView(prog.buffer);
  const put = (i: number, code: number, jt: number, jf: number, k: number) => {
    dv.setUint16(i * 8, code, true);
    dv.setUint8(i * 8 + 2, jt);
    dv.setUint8(i * 8 + 3, jf);
    dv.setUint32(i * 8 + 4, k, true);
  };
  put(0, 0x20, 0, 0, 12); // BPF_LD | BPF_W | BPF_ABS
  ids.forEach((p, i) => put(i + 1, 0x15, n - i, 0, HOST_LE ? swap32(p) : p >>> 0)); // BPF_JMP|BPF_JEQ|BPF_K
  put(n + 1, 0x06, 0, 0, 0xffffffff); // BPF_RET: accept
  put(n + 2, 0x06, 0, 0, 0); // BPF_RET: drop
  return prog;
}

/** One subscription to nf_tables notifications. */
export class NftablesMonitor {
  readonly #nl: Deno.PointerObject;
  readonly #fd: number;
  readonly #own: OwnSockets;
  readonly #unfollow: () => void;
  #running: Promise<void> | undefined;
  #ownReceived = 0;
  #stopped = false;
  #closed = false;
  #handlers: MonitorHandlers | undefined;
  /** Quiet windows for our large batches (hand it to the clients' `quietWith`). */
  readonly quiet: QuietWindow;

  /**
   * Opens and subscribes the socket. `log` takes the one warning of
   * own_sockets.ts when `own` is not given.
   *
   * @throws Error naming the failed step (no libmnl, no permission).
   */
  constructor(own?: OwnSockets, opts: { log?: LogFn } = {}) {
    const { nl, fd } = openNetfilter({ timeoutSec: 1, rcvbuf: 8 << 20 });
    this.#nl = nl;
    this.#fd = fd;
    // After the socket opened: it is ours too.
    this.#own = own ?? new OwnSockets(undefined, { log: opts.log });
    this.quiet = new QuietWindow({
      readGeneration: readGenerationId,
      subscribe: (on) => !this.#closed && this.#membership(on),
      onUnseen: (why) => this.#handlers?.onOverrun(why),
    });
    if (!this.#membership(true)) {
      const why = strerror(lastErrno());
      libmnl().mnl_socket_close(nl);
      throw new Error(`nftables notifications: joining the group: ${why}`);
    }
    this.#filter();
    // A socket we open later (the raw writer's, at its first batch, often inside a quiet window)
    // is filtered from its next batch on, not only once one of its notifications got through.
    this.#unfollow = this.#own.follow(() => this.#closed || this.#filter());
  }

  /** Joins or leaves NFNLGRP_NFTABLES; false when setsockopt failed. */
  #membership(on: boolean): boolean {
    const opt = on ? NETLINK_ADD_MEMBERSHIP : NETLINK_DROP_MEMBERSHIP;
    return libc().setsockopt(this.#fd, SOL_NETLINK, opt, new Int32Array([NFNLGRP_NFTABLES]), 4) >=
      0;
  }

  /** Port ids of our own sockets, as last read. */
  get ownPortids(): ReadonlySet<number> {
    return this.#own.ids;
  }

  /** Notifications of our own batches that got past the socket filter (each woke the loop). */
  get ownReceived(): number {
    return this.#ownReceived;
  }

  /** (Re)installs the socket filter that drops our own notifications. */
  #filter(): void {
    const prog = ownPortidFilter(this.#own.ids);
    const fprog = new BigUint64Array(2);
    fprog[0] = BigInt(prog.length / 8);
    fprog[1] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(prog)));
    // A filter that cannot be attached only costs reading our own notifications.
    libc().setsockopt(this.#fd, SOL_SOCKET, SO_ATTACH_FILTER, new Uint8Array(fprog.buffer), 16);
  }

  /** Starts receiving; handlers run on the event loop. */
  start(h: MonitorHandlers): void {
    this.#handlers = h;
    this.#running ??= this.#loop(h).catch((err) => {
      if (!this.#stopped) h.onError?.(err instanceof Error ? err : new Error(String(err)));
    }).finally(() => this.#close());
  }

  async #loop(h: MonitorHandlers): Promise<void> {
    const c = libc();
    const rx = new Uint8Array(RX);
    // struct pollfd { int fd; short events; short revents; }
    const pfd = new Uint8Array(8);
    const pv = new DataView(pfd.buffer);
    pv.setInt32(0, this.#fd, true);
    pv.setInt16(4, POLLIN, true);
    while (!this.#stopped) {
      pv.setInt16(6, 0, true);
      await c.poll_async(pfd, 1n, 1000);
      if (this.#stopped) return;
      if (pv.getInt16(6, true) === 0) continue; // timeout
      this.#drain(h, rx);
    }
  }

  /**
   * Receives until the socket is empty, then reports the foreign notifications
   * of the whole burst at once (a batch's notifications arrive together at its
   * commit: one report, one check), and any overrun.
   */
  #drain(h: MonitorHandlers, rx: Uint8Array): void {
    const c = libc();
    const msgs: NftNotification[] = [];
    let overrun = false;
    for (;;) {
      const got = Number(c.recv(this.#fd, rx, BigInt(RX), MSG_DONTWAIT));
      if (got < 0) {
        const e = lastErrno();
        if (e === EINTR) continue;
        if (e === EAGAIN) break;
        if (e === ENOBUFS) {
          overrun = true;
          continue;
        }
        throw new Error(`nftables notifications: receive: ${strerror(e)}`);
      }
      for (const m of decodeNotifications(rx, got)) msgs.push(m);
    }
    if (overrun) h.onOverrun();
    if (msgs.length === 0) return;
    const { foreign, changed } = this.#own.foreign(msgs);
    this.#ownReceived += msgs.length - foreign.length;
    if (changed) this.#filter();
    if (foreign.length > 0) h.onForeign(foreign);
  }

  #close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unfollow();
    libmnl().mnl_socket_close(this.#nl);
  }

  /** Stops receiving (within the receive timeout) and closes the socket. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#running === undefined) this.#close();
    await this.#running;
  }
}
