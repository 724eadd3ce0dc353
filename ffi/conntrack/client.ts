/**
 * The real {@link ConntrackClient}: dumps through libnetfilter_conntrack and
 * deletes over a separate netlink socket (libmnl) with CTA_ID attached, so a
 * delete never hits a flow re-created with the same tuple.
 *
 * Everything here runs synchronously on the calling thread: libnetfilter_conntrack
 * invokes the dump callback from inside `nfct_query`. The wire values (network-order
 * addresses, the delete request's header, CTA_ID and fence) are in `wire.ts`.
 *
 * @module
 */
import type { IpFamily } from "../../net/family.ts";
import { formatIPv6Bytes } from "../../net/ip.ts";
import {
  AF_INET,
  AF_INET6,
  ATTR,
  CONNTRACK,
  type ConntrackLibs,
  describeErrno,
  lastErrno,
  loadConntrackLibs,
  NFCT_CB_CONTINUE,
  NFCT_CB_STOP,
  NFCT_Q_DESTROY,
  NFCT_Q_DUMP,
  NFCT_T_ALL,
} from "./libconntrack.ts";
import { align4, parseAcks } from "../netlink/message.ts";
import { openNetfilter } from "../netlink/socket.ts";
import { EAGAIN, EINTR } from "../errno.ts";
import type { ConntrackClient, ConntrackEntry, DeleteResult, DumpResult } from "./types.ts";
import { emptyConntrackEntry } from "./types.ts";
import {
  appendIdAttr,
  type EncodedDeletes,
  encodeDeletes,
  formatIpv4,
  LITTLE_ENDIAN,
  putDeleteHeader,
  putFence,
  swap16,
} from "./wire.ts";

/** Options of {@link openConntrack}. */
export interface OpenConntrackOptions {
  /**
   * Delete over a raw netlink socket with CTA_ID (default true). False uses
   * `nfct_query(NFCT_Q_DESTROY)`, which matches on the tuple only (see
   * the client's `exactDeletes`).
   */
  exactDeletes?: boolean;
}

/** Entries per sendto when deleting; keeps the acks well inside the socket's receive buffer. */
const DELETE_BATCH = 128;
const TX_BUF = 64 * 1024;
/** Room one delete request may need (IPv6 tuple + zone + id is ~130 bytes). */
const MAX_MSG = 512;
const RX_BUF = 64 * 1024;
const RCVBUF = 1 << 20;

/**
 * {@link ConntrackClient} over libnetfilter_conntrack (dump) and a libmnl
 * netlink socket (delete). One instance per network namespace it was opened in.
 */
class FfiConntrackClient implements ConntrackClient {
  readonly #libs: ConntrackLibs;
  #dumpHandle: Deno.PointerValue = null;
  #queryHandle: Deno.PointerValue = null;
  #mnlSocket: Deno.PointerValue = null;
  readonly #ct4: Deno.PointerValue;
  readonly #ct6: Deno.PointerValue;
  readonly #callback: Deno.UnsafeCallback<{
    readonly parameters: readonly ["i32", "pointer", "pointer"];
    readonly result: "i32";
  }>;
  #closed = false;
  #seq = 1;

  // State of the running dump, read by the callback.
  #dumping = false;
  #visit: (e: Readonly<ConntrackEntry>) => void = () => {};
  #protoFilter = -1;
  #dumpCount = 0;
  #dumpError: unknown = undefined;
  readonly #entry: ConntrackEntry = emptyConntrackEntry();
  readonly #addr6 = new Uint8Array(16);
  readonly #tx = new Uint8Array(TX_BUF);
  readonly #txView = new DataView(this.#tx.buffer);
  readonly #txPtr = Deno.UnsafePointer.of(this.#tx);
  readonly #rx = new Uint8Array(RX_BUF);
  readonly #rxView = new DataView(this.#rx.buffer);

  /**
   * True when deletes carry CTA_ID (raw netlink path). False on the
   * `nfct_query` fallback: libnetfilter_conntrack 1.0.9 does not send CTA_ID,
   * so a delete racing with a flow re-created on the same tuple removes the
   * new flow.
   */
  readonly exactDeletes: boolean;

  /** Opens the handles; prefer {@link openConntrack}. */
  constructor(opts: OpenConntrackOptions = {}) {
    this.#libs = loadConntrackLibs();
    const { nfct } = this.#libs;
    this.#callback = new Deno.UnsafeCallback(
      { parameters: ["i32", "pointer", "pointer"], result: "i32" } as const,
      (_type, ct) => this.#onEntry(ct),
    );
    this.#dumpHandle = this.#openDumpHandle();
    this.#ct4 = nfct.nfct_new();
    this.#ct6 = nfct.nfct_new();
    if (this.#ct4 === null || this.#ct6 === null) {
      this.close();
      throw new Error("conntrack: nfct_new failed (out of memory)");
    }
    nfct.nfct_set_attr_u8(this.#ct4, ATTR.ORIG_L3PROTO, AF_INET);
    nfct.nfct_set_attr_u8(this.#ct6, ATTR.ORIG_L3PROTO, AF_INET6);
    this.exactDeletes = opts.exactDeletes !== false && this.#openMnl();
  }

  /** Opens a libnetfilter_conntrack handle with the dump callback registered. */
  #openDumpHandle(): Deno.PointerValue {
    const { nfct } = this.#libs;
    const h = nfct.nfct_open(CONNTRACK, 0);
    if (h === null) {
      const why = describeErrno(lastErrno());
      this.close();
      throw new Error(`conntrack: nfct_open failed: ${why}`);
    }
    if (nfct.nfct_callback_register(h, NFCT_T_ALL, this.#callback.pointer, null) < 0) {
      const why = describeErrno(lastErrno());
      nfct.nfct_close(h);
      this.close();
      throw new Error(`conntrack: nfct_callback_register failed: ${why}`);
    }
    return h;
  }

  /** Opens the delete socket; false (and the nfct_query fallback) when that fails. */
  #openMnl(): boolean {
    try {
      // Error reports without the echoed request keep a batch of failures small,
      // and a roomy receive buffer keeps the kernel from dropping any of them
      // (it needs CAP_NET_ADMIN, which conntrack access needs anyway).
      this.#mnlSocket = openNetfilter({ timeoutSec: 5, rcvbuf: RCVBUF, capAck: true }).nl;
      return true;
    } catch {
      return false;
    }
  }

  /** Throws once the client is closed. */
  #assertOpen(): void {
    if (this.#closed) throw new Error("conntrack client is closed");
  }

  /** Streams one family's entries to `visit` (see {@link ConntrackClient.dump}). */
  dump(family: IpFamily, visit: (e: Readonly<ConntrackEntry>) => void, proto?: number): DumpResult {
    this.#assertOpen();
    if (family !== 4 && family !== 6) {
      throw new TypeError(`conntrack dump: family must be 4 or 6, got ${family}`);
    }
    if (proto !== undefined && (!Number.isInteger(proto) || proto < 0 || proto > 255)) {
      throw new TypeError(`conntrack dump: proto must be an integer 0-255, got ${proto}`);
    }
    if (this.#dumping) throw new Error("conntrack dump: called again from inside a dump visitor");
    this.#dumping = true;
    this.#visit = visit;
    this.#protoFilter = proto ?? -1;
    this.#dumpCount = 0;
    this.#dumpError = undefined;
    this.#entry.family = family;
    let rc = -1;
    let errno = 0;
    try {
      rc = this.#libs.nfct.nfct_query(
        this.#dumpHandle,
        NFCT_Q_DUMP,
        new Uint32Array([family === 4 ? AF_INET : AF_INET6]),
      );
      // errno must be read before any other call can overwrite it.
      if (rc < 0) errno = lastErrno();
    } finally {
      this.#dumping = false;
      this.#visit = () => {};
    }
    if (rc < 0 || this.#dumpError !== undefined) {
      // The rest of an unfinished dump may still sit in the socket and would be
      // read as the answer to the next query: start over on a fresh handle.
      this.#libs.nfct.nfct_close(this.#dumpHandle);
      this.#dumpHandle = null;
      this.#dumpHandle = this.#openDumpHandle();
    }
    if (this.#dumpError !== undefined) throw this.#dumpError;
    if (rc < 0) {
      if (errno === EINTR) return { count: this.#dumpCount, interrupted: true };
      throw new Error(
        `conntrack dump (IPv${family}) failed after ${this.#dumpCount} entries: ${
          describeErrno(errno)
        }`,
      );
    }
    return { count: this.#dumpCount, interrupted: false };
  }

  /** The dump callback: fills the shared entry and hands it to the visitor. */
  #onEntry(ct: Deno.PointerValue): number {
    try {
      const n = this.#libs.nfct;
      const proto = n.nfct_get_attr_u8(ct, ATTR.ORIG_L4PROTO);
      if (this.#protoFilter >= 0 && proto !== this.#protoFilter) return NFCT_CB_CONTINUE;
      const e = this.#entry;
      e.proto = proto;
      if (e.family === 4) {
        e.origSrc = formatIpv4(n.nfct_get_attr_u32(ct, ATTR.ORIG_IPV4_SRC));
        e.origDst = formatIpv4(n.nfct_get_attr_u32(ct, ATTR.ORIG_IPV4_DST));
        e.replySrc = formatIpv4(n.nfct_get_attr_u32(ct, ATTR.REPL_IPV4_SRC));
        e.replyDst = formatIpv4(n.nfct_get_attr_u32(ct, ATTR.REPL_IPV4_DST));
      } else {
        e.origSrc = this.#readIpv6(ct, ATTR.ORIG_IPV6_SRC);
        e.origDst = this.#readIpv6(ct, ATTR.ORIG_IPV6_DST);
        e.replySrc = this.#readIpv6(ct, ATTR.REPL_IPV6_SRC);
        e.replyDst = this.#readIpv6(ct, ATTR.REPL_IPV6_DST);
      }
      // Unset attributes (portless protocols) read as 0.
      e.origSport = swap16(n.nfct_get_attr_u16(ct, ATTR.ORIG_PORT_SRC));
      e.origDport = swap16(n.nfct_get_attr_u16(ct, ATTR.ORIG_PORT_DST));
      e.replySport = swap16(n.nfct_get_attr_u16(ct, ATTR.REPL_PORT_SRC));
      e.replyDport = swap16(n.nfct_get_attr_u16(ct, ATTR.REPL_PORT_DST));
      e.mark = n.nfct_get_attr_u32(ct, ATTR.MARK);
      e.zone = n.nfct_get_attr_u16(ct, ATTR.ZONE);
      e.id = n.nfct_get_attr_u32(ct, ATTR.ID);
      this.#dumpCount++;
      this.#visit(e);
      return NFCT_CB_CONTINUE;
    } catch (err) {
      // An exception must not unwind through C; stop the dump and rethrow after it.
      this.#dumpError = err;
      return NFCT_CB_STOP;
    }
  }

  /** Copies an IPv6 attribute while the library still owns the memory, and formats it. */
  #readIpv6(ct: Deno.PointerValue, attr: number): string {
    const p = this.#libs.nfct.nfct_get_attr(ct, attr);
    if (p === null) return "::";
    Deno.UnsafePointerView.copyInto(p, this.#addr6);
    return formatIPv6Bytes(this.#addr6, 0, "mapped");
  }

  /** Deletes entries by original tuple (+ id); see {@link ConntrackClient.delete}. */
  delete(entries: readonly ConntrackEntry[]): DeleteResult {
    this.#assertOpen();
    if (this.#dumping) throw new Error("conntrack delete: called from inside a dump visitor");
    const enc = encodeDeletes(entries);
    return this.exactDeletes ? this.#deleteRaw(entries, enc) : this.#deleteQuery(entries, enc);
  }

  /** Loads entry `i` into the reusable nf_conntrack object of its family. */
  #fill(e: ConntrackEntry, i: number, enc: EncodedDeletes): Deno.PointerValue {
    const n = this.#libs.nfct;
    const ct = e.family === 4 ? this.#ct4 : this.#ct6;
    if (e.family === 4) {
      n.nfct_set_attr_u32(ct, ATTR.ORIG_IPV4_SRC, enc.v4[2 * i]);
      n.nfct_set_attr_u32(ct, ATTR.ORIG_IPV4_DST, enc.v4[2 * i + 1]);
    } else {
      n.nfct_set_attr(ct, ATTR.ORIG_IPV6_SRC, enc.v6!.subarray(32 * i, 32 * i + 16));
      n.nfct_set_attr(ct, ATTR.ORIG_IPV6_DST, enc.v6!.subarray(32 * i + 16, 32 * i + 32));
    }
    n.nfct_set_attr_u8(ct, ATTR.ORIG_L4PROTO, e.proto);
    n.nfct_set_attr_u16(ct, ATTR.ORIG_PORT_SRC, swap16(e.origSport));
    n.nfct_set_attr_u16(ct, ATTR.ORIG_PORT_DST, swap16(e.origDport));
    n.nfct_set_attr_u16(ct, ATTR.ZONE, e.zone);
    return ct;
  }

  /**
   * Builds each request with nfct_nlmsg_build and appends CTA_ID (the kernel
   * then refuses with ENOENT when the flow under that tuple has another id).
   * Many requests go in one sendto; deletes ask for no ack, so the kernel only
   * reports failures (matched by sequence number), and a final NOOP fence
   * acks the batch: every delete without an error report before it succeeded.
   */
  #deleteRaw(entries: readonly ConntrackEntry[], enc: EncodedDeletes): DeleteResult {
    const { nfct, mnl } = this.#libs;
    const result: DeleteResult = { deleted: 0, failed: [] };
    const reported = new Uint8Array(DELETE_BATCH);
    for (let start = 0; start < entries.length;) {
      const firstSeq = this.#seq;
      let off = 0;
      let k = 0;
      while (start + k < entries.length && k < DELETE_BATCH && off + MAX_MSG <= TX_BUF) {
        const e = entries[start + k];
        const ct = this.#fill(e, start + k, enc);
        putDeleteHeader(this.#txView, off, firstSeq + k, e.family === 4 ? AF_INET : AF_INET6);
        if (nfct.nfct_nlmsg_build(Deno.UnsafePointer.offset(this.#txPtr!, off), ct) < 0) {
          throw new Error(
            `conntrack delete: nfct_nlmsg_build failed for entry ${start + k}: ${
              describeErrno(lastErrno())
            }`,
          );
        }
        const len = e.id !== 0
          ? appendIdAttr(this.#txView, off, e.id)
          : this.#txView.getUint32(off, LITTLE_ENDIAN);
        off += align4(len);
        k++;
      }
      const fenceSeq = (firstSeq + k) >>> 0;
      off += putFence(this.#txView, off, fenceSeq);
      this.#seq = (fenceSeq + 1) >>> 0 || 1;
      if (mnl.mnl_socket_sendto(this.#mnlSocket, this.#tx, BigInt(off)) < 0) {
        throw new Error(
          `conntrack delete: sending ${k} requests failed after ${result.deleted} deletes: ${
            describeErrno(lastErrno())
          }`,
        );
      }
      reported.fill(0, 0, k);
      let failures = 0;
      let fenced = false;
      const onAck = (seq: number, errno: number) => {
        if (seq === fenceSeq) {
          fenced = true;
          return;
        }
        const j = (seq - firstSeq) >>> 0;
        // Not ours (stale), a duplicate, or a success ack we did not ask for.
        if (j >= k || reported[j] !== 0 || errno === 0) return;
        reported[j] = 1;
        failures++;
        result.failed.push({ entry: entries[start + j], error: describeErrno(errno) });
      };
      while (!fenced) {
        const got = Number(mnl.mnl_socket_recvfrom(this.#mnlSocket, this.#rx, BigInt(RX_BUF)));
        if (got < 0) {
          const errno = lastErrno();
          if (errno === EINTR) continue;
          // Timed out or replies dropped: what happened to the rest is unknown.
          const why = errno === EAGAIN
            ? "no reply from the kernel within 5 s"
            : describeErrno(errno);
          for (let j = 0; j < k; j++) {
            if (reported[j] === 0) {
              result.failed.push({ entry: entries[start + j], error: `unknown outcome: ${why}` });
            }
          }
          failures = k;
          break;
        }
        parseAcks(this.#rxView, got, onAck);
      }
      result.deleted += k - failures;
      start += k;
    }
    return result;
  }

  /**
   * Fallback without CTA_ID: one nfct_query(DESTROY) per entry on a second
   * handle. Racy: a flow re-created with the same tuple since the dump is
   * deleted too.
   */
  #deleteQuery(entries: readonly ConntrackEntry[], enc: EncodedDeletes): DeleteResult {
    const n = this.#libs.nfct;
    if (this.#queryHandle === null) {
      this.#queryHandle = n.nfct_open(CONNTRACK, 0);
      if (this.#queryHandle === null) {
        throw new Error(
          `conntrack delete: nfct_open failed: ${describeErrno(lastErrno())}`,
        );
      }
    }
    const result: DeleteResult = { deleted: 0, failed: [] };
    for (let i = 0; i < entries.length; i++) {
      const ct = this.#fill(entries[i], i, enc);
      const rc = n.nfct_query_ct(this.#queryHandle, NFCT_Q_DESTROY, ct);
      if (rc < 0) {
        result.failed.push({
          entry: entries[i],
          error: describeErrno(lastErrno()),
        });
      } else {
        result.deleted++;
      }
    }
    return result;
  }

  /** Releases all native resources (idempotent). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const { nfct, mnl } = this.#libs;
    if (this.#dumpHandle !== null) nfct.nfct_close(this.#dumpHandle);
    if (this.#queryHandle !== null) nfct.nfct_close(this.#queryHandle);
    if (this.#mnlSocket !== null) mnl.mnl_socket_close(this.#mnlSocket);
    if (this.#ct4 !== null && this.#ct4 !== undefined) nfct.nfct_destroy(this.#ct4);
    if (this.#ct6 !== null && this.#ct6 !== undefined) nfct.nfct_destroy(this.#ct6);
    this.#dumpHandle = null;
    this.#queryHandle = null;
    this.#mnlSocket = null;
    this.#callback?.close();
  }
}

/**
 * Opens a conntrack client for the network namespace of the calling thread.
 *
 * @throws LibraryNotFoundError when libnetfilter_conntrack or libmnl is missing.
 */
export function openConntrack(opts: OpenConntrackOptions = {}): ConntrackClient & {
  readonly exactDeletes: boolean;
} {
  return new FfiConntrackClient(opts);
}
