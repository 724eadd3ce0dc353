/**
 * Reads every set of the network namespace (all tables, all families) over
 * a plain NETLINK_NETFILTER dump, without libnftables, and finds those whose
 * userdata would crash libnftables 1.0.x (see set_screen.ts). Also sends a
 * table delete the same way, for `--cleanup` when libnftables cannot be used.
 *
 * @module
 */
import { openLibrary } from "../../libpath.ts";
import {
  type DumpedSet,
  encodeDeleteTable,
  encodeSetDumpRequest,
  parseSetDump,
  udataHazard,
} from "./set_screen.ts";
import { NetfilterSocket } from "./socket.ts";

const NETLINK_NETFILTER = 12;
const SOL_SOCKET = 1;
const SO_RCVTIMEO = 20;
const EINTR = 4;

const SYMBOLS = {
  mnl_socket_open: { parameters: ["i32"], result: "pointer" },
  mnl_socket_bind: { parameters: ["pointer", "u32", "i32"], result: "i32" },
  mnl_socket_get_fd: { parameters: ["pointer"], result: "i32" },
  mnl_socket_sendto: { parameters: ["pointer", "buffer", "usize"], result: "isize" },
  mnl_socket_recvfrom: { parameters: ["pointer", "buffer", "usize"], result: "isize" },
  mnl_socket_close: { parameters: ["pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

const LIBC = {
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

let libs:
  | {
    mnl: Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];
    libc: Deno.DynamicLibrary<typeof LIBC>["symbols"];
  }
  | undefined;

function open() {
  libs ??= {
    mnl: openLibrary("libmnl.so.0", SYMBOLS, "Debian/Ubuntu: libmnl0; Fedora/RHEL: libmnl").symbols,
    libc: openLibrary("libc.so.6", LIBC, "the C library").symbols,
  };
  return libs;
}

function errno(): number {
  const p = open().libc.__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
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
  const { mnl, libc } = open();
  const nl = mnl.mnl_socket_open(NETLINK_NETFILTER);
  if (nl === null) throw new Error(`netlink socket: errno ${errno()}`);
  try {
    if (mnl.mnl_socket_bind(nl, 0, 0) < 0) throw new Error(`netlink bind: errno ${errno()}`);
    const fd = mnl.mnl_socket_get_fd(nl);
    // Never wait forever for the rest of a dump.
    libc.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, new BigInt64Array([5n, 0n]), 16);
    if (Number(mnl.mnl_socket_sendto(nl, request, BigInt(request.length))) < 0) {
      throw new Error(`netlink send: errno ${errno()}`);
    }
    const rx = new Uint8Array(1 << 16);
    for (;;) {
      const got = Number(mnl.mnl_socket_recvfrom(nl, rx, BigInt(rx.length)));
      if (got < 0) {
        const e = errno();
        if (e === EINTR) continue;
        throw new Error(`netlink ${what} dump: errno ${e}`);
      }
      const r = parse(rx, got);
      if (r === "done") return;
      if (typeof r === "number") throw new Error(`netlink ${what} dump: errno ${r}`);
    }
  } finally {
    mnl.mnl_socket_close(nl);
  }
}

/** Every set of the namespace (synchronous: a few ms, even with thousands of sets). */
export function dumpSets(): DumpedSet[] {
  const out: DumpedSet[] = [];
  netfilterDump(
    "set",
    encodeSetDumpRequest(1),
    (rx, got) => parseSetDump(rx, got, (s) => out.push(s)),
  );
  return out;
}

/** A set libnftables 1.0.x would crash on, and why. */
export interface HazardousSet {
  family: string;
  table: string;
  name: string;
  why: string;
}

/** The sets of the namespace whose userdata would crash libnftables 1.0.x. */
export function hazardousSets(sets: readonly DumpedSet[] = dumpSets()): HazardousSet[] {
  const out: HazardousSet[] = [];
  for (const s of sets) {
    if (s.userdata === undefined) continue;
    const why = udataHazard(s.userdata);
    if (why !== undefined) out.push({ family: s.family, table: s.table, name: s.name, why });
  }
  return out;
}

/**
 * Why libnftables must not run now, in words for the log, or undefined: a
 * set whose userdata it would crash on. Undefined too when the dump itself
 * fails (no libmnl): libnftables decides then.
 */
export function libnftablesHazard(): string | undefined {
  let found;
  try {
    found = hazardousSets();
  } catch {
    return undefined;
  }
  if (found.length === 0) return undefined;
  const s = found[0];
  const more = found.length > 1 ? ` (and ${found.length - 1} more sets)` : "";
  return `not calling libnftables: it would crash reading set ${s.family} ${s.table} ` +
    `${s.name}${more}, which another program wrote (probably a newer nft): ${s.why}. ` +
    `Remove that set or upgrade libnftables; rules already in place keep working`;
}

/** Deletes a table over plain netlink; resolves with the kernel's errno (0: deleted). */
export async function deleteTableOverNetlink(family: string, table: string): Promise<number> {
  const sock = new NetfilterSocket();
  try {
    const { acks } = await sock.send(encodeDeleteTable(family, table, 1));
    return [...acks.values()].find((e) => e !== 0) ?? 0;
  } finally {
    sock.close();
  }
}
