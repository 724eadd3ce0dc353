/**
 * The netlink port ids of this process's own sockets of one protocol,
 * libnftables' too (it opens its socket inside its context and says nothing
 * of it): getsockname(2) on our descriptors. Deno refuses /proc/self/fd to a
 * program without --allow-all, so the descriptors are probed one by one.
 *
 * Two costs, two paths:
 * - A full scan probes every descriptor below the fd table's size (FDSize in
 *   /proc/self/status, read through libc; every open descriptor is below it),
 *   with no cut-off after a run of closed ones, so a socket at a high
 *   descriptor (thousands of relayed connections below it) is found. About
 *   1.6 µs a descriptor (measured: 1.4 ms at start-up's 256, 9 ms at 4k,
 *   26 ms at 16k).
 * - The descriptors a full scan found are kept ("watched"), and re-reading
 *   their port ids is a few syscalls. libnftables 1.0.x creates its socket in
 *   nft_ctx_new but binds it (gets a port id) only at the first command, so
 *   the client scans after both, and the fresh port id is then one re-read
 *   away.
 *
 * @module
 */
import { lastErrno, libc } from "../libc.ts";
import { readTextFileSync } from "../libc_files.ts";
import { fileLimit } from "../rlimit.ts";
import { NETLINK_NETFILTER } from "./message.ts";

const AF_NETLINK = 16;
const SOL_SOCKET = 1, SO_PROTOCOL = 38;
const EBADF = 9;
/** Without FDSize, the soft RLIMIT_NOFILE, but no more than this (about 4 s of probes). */
const FALLBACK_MAX = 1 << 20;

/**
 * The port id in a `struct sockaddr_nl` (family u16, pad u16, pid u32, groups
 * u32) of `len` bytes, or undefined when it is not a netlink address.
 */
export function netlinkPortid(addr: Uint8Array, len: number): number | undefined {
  if (len < 12) return undefined;
  const dv = new DataView(addr.buffer, addr.byteOffset, addr.length);
  return dv.getUint16(0, true) === AF_NETLINK ? dv.getUint32(4, true) : undefined;
}

/** What probing one descriptor says. */
export type FdProbe =
  /** Not open. */
  | "closed"
  /** Open, but not a netlink socket of the protocol asked for. */
  | "other"
  /** A netlink socket of the protocol: its port id (0 while it is not bound yet). */
  | number;

/** The system calls a scan needs (mocked in unit tests). */
export interface FdProber {
  /** What descriptor `fd` is. */
  probe(fd: number): FdProbe;
  /** Descriptors below this are all there may be open. */
  limit(): number;
}

/** The fd table's size (FDSize), else the soft open-file limit capped at {@link FALLBACK_MAX}. */
export function fdScanLimit(): number {
  try {
    const m = readTextFileSync("/proc/self/status").match(/^FDSize:\s+(\d+)/m);
    if (m) return Number(m[1]);
  } catch { /* no /proc: the rlimit bounds it */ }
  try {
    return Math.min(fileLimit().soft, FALLBACK_MAX);
  } catch {
    return FALLBACK_MAX;
  }
}

/** The real prober for netlink sockets of `protocol`: getsockname and SO_PROTOCOL. */
export function netlinkProber(protocol: number): FdProber {
  const c = libc();
  const addr = new Uint8Array(128), alen = new Uint32Array(1);
  const proto = new Int32Array(1), plen = new Uint32Array(1);
  return {
    limit: fdScanLimit,
    probe(fd) {
      alen[0] = addr.length;
      if (c.getsockname(fd, addr, new Uint8Array(alen.buffer)) < 0) {
        return lastErrno() === EBADF ? "closed" : "other";
      }
      const portid = netlinkPortid(addr, alen[0]);
      if (portid === undefined) return "other";
      plen[0] = 4;
      const ok = c.getsockopt(
        fd,
        SOL_SOCKET,
        SO_PROTOCOL,
        new Uint8Array(proto.buffer),
        new Uint8Array(plen.buffer),
      );
      return ok === 0 && proto[0] === protocol ? portid : "other";
    },
  };
}

/** Port ids of bound sockets among `found` (0 is the kernel's own, never a socket's). */
function portidsOf(found: ReadonlyMap<number, number>): Set<number> {
  return new Set([...found.values()].filter((p) => p !== 0));
}

/**
 * This process's netlink sockets of one protocol: the descriptors a full
 * scan found, re-read cheaply, and scanned again when asked.
 */
export class OwnNetlinkSockets {
  /** Watched descriptor -> its port id as last read (0: not bound yet). */
  #fds = new Map<number, number>();
  #scans = 0;
  readonly #listeners = new Set<(portids: Set<number>) => void>();

  /** Sockets found through `prober`. */
  constructor(private readonly prober: FdProber) {}

  /** How many full scans ran (tests, diagnostics). */
  get scans(): number {
    return this.#scans;
  }

  /** The watched descriptors and their port ids (0: not bound yet). */
  get watched(): ReadonlyMap<number, number> {
    return this.#fds;
  }

  /**
   * Probes every descriptor below the fd table's size and watches the
   * sockets found (a socket just created, or one at a high descriptor).
   */
  rescan(): Set<number> {
    this.#scans++;
    const found = new Map<number, number>();
    const limit = this.prober.limit();
    for (let fd = 0; fd < limit; fd++) {
      const p = this.prober.probe(fd);
      if (typeof p === "number") found.set(fd, p);
    }
    this.#fds = found;
    const ids = portidsOf(found);
    for (const listener of this.#listeners) listener(new Set(ids));
    return ids;
  }

  /**
   * Calls `listener` with the port ids every full scan finds (the clients scan as they open
   * sockets), so a reader can act before the new socket's first notification; returns the
   * unsubscribe.
   */
  subscribe(listener: (portids: Set<number>) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /**
   * Runs `create` (which opens sockets) between two full scans; returns its
   * result and the descriptors of the sockets it opened that are not bound
   * yet (libnftables' socket, right after nft_ctx_new).
   */
  around<T>(create: () => T): { value: T; fresh: number[] } {
    this.rescan();
    const before = new Set(this.#fds.keys());
    const value = create();
    this.rescan();
    const fresh = [...this.#fds].filter(([fd, p]) => p === 0 && !before.has(fd)).map(([fd]) => fd);
    return { value, fresh };
  }

  /**
   * The watched sockets' port ids, read again now (a few syscalls): picks up
   * a socket that got bound since, forgets a descriptor that is no longer one.
   */
  portids(): Set<number> {
    for (const fd of [...this.#fds.keys()]) {
      const p = this.prober.probe(fd);
      if (typeof p === "number") this.#fds.set(fd, p);
      else this.#fds.delete(fd);
    }
    return portidsOf(this.#fds);
  }
}

let shared: OwnNetlinkSockets | null | undefined;

/**
 * This process's NETLINK_NETFILTER sockets, one tracker per process (the
 * nftables clients scan into it as they open sockets, the notification
 * monitor reads it); null without libc (unit tests refuse native loading).
 */
export function ownNetfilterSockets(): OwnNetlinkSockets | null {
  if (shared === undefined) {
    try {
      shared = new OwnNetlinkSockets(netlinkProber(NETLINK_NETFILTER));
    } catch {
      shared = null;
    }
  }
  return shared;
}
