/**
 * Raw bindings to libnetfilter_conntrack.so.3 (1.0.9), with the shared
 * libmnl (../netlink/libmnl.ts) and libc (../libc.ts) the conntrack client uses.
 * Enum values were measured on the target systems (see platform-notes).
 *
 * @module
 */
import { openLibrary } from "../libpath.ts";
import { type Libc, libc, strerror } from "../libc.ts";
import { libmnl, type Mnl } from "../netlink/libmnl.ts";
import { errnoName } from "../errno.ts";

/** `nfct_open` subsystem id for conntrack entries. */
export const CONNTRACK = 1;
/** `nfct_callback_register` type: every message type. */
export const NFCT_T_ALL = 7;
/** `nfct_query` kind: delete one entry (data: an nf_conntrack object). */
export const NFCT_Q_DESTROY = 2;
/** `nfct_query` kind: dump the table (data: pointer to a u32 address family). */
export const NFCT_Q_DUMP = 5;
/** Callback return value: stop the dump. */
export const NFCT_CB_STOP = 0;
/** Callback return value: go on (and let the library free the object). */
export const NFCT_CB_CONTINUE = 1;

/** `enum nf_conntrack_attr` values used here. */
export const ATTR = {
  ORIG_IPV4_SRC: 0,
  ORIG_IPV4_DST: 1,
  REPL_IPV4_SRC: 2,
  REPL_IPV4_DST: 3,
  ORIG_IPV6_SRC: 4,
  ORIG_IPV6_DST: 5,
  REPL_IPV6_SRC: 6,
  REPL_IPV6_DST: 7,
  ORIG_PORT_SRC: 8,
  ORIG_PORT_DST: 9,
  REPL_PORT_SRC: 10,
  REPL_PORT_DST: 11,
  ORIG_L3PROTO: 15,
  ORIG_L4PROTO: 17,
  TIMEOUT: 24,
  MARK: 25,
  ID: 31,
  STATUS: 32,
  ZONE: 61,
} as const;

/** IPv4 address family number. */
export const AF_INET = 2;
/** IPv6 address family number. */
export const AF_INET6 = 10;

/** Netlink bus of nfnetlink, for `mnl_socket_open`. */
export const NETLINK_NETFILTER = 12;

/** The libnetfilter_conntrack symbols the client binds. */
export const NFCT_SYMBOLS = {
  nfct_open: { parameters: ["u8", "u32"], result: "pointer" },
  nfct_close: { parameters: ["pointer"], result: "i32" },
  nfct_callback_register: {
    parameters: ["pointer", "i32", "function", "pointer"],
    result: "i32",
  },
  nfct_query: { parameters: ["pointer", "i32", "buffer"], result: "i32" },
  /** The same function for queries whose data is an nf_conntrack object. */
  nfct_query_ct: { name: "nfct_query", parameters: ["pointer", "i32", "pointer"], result: "i32" },
  nfct_new: { parameters: [], result: "pointer" },
  nfct_destroy: { parameters: ["pointer"], result: "void" },
  nfct_get_attr: { parameters: ["pointer", "i32"], result: "pointer" },
  nfct_get_attr_u8: { parameters: ["pointer", "i32"], result: "u8" },
  nfct_get_attr_u16: { parameters: ["pointer", "i32"], result: "u16" },
  nfct_get_attr_u32: { parameters: ["pointer", "i32"], result: "u32" },
  nfct_set_attr: { parameters: ["pointer", "i32", "buffer"], result: "void" },
  nfct_set_attr_u8: { parameters: ["pointer", "i32", "u8"], result: "void" },
  nfct_set_attr_u16: { parameters: ["pointer", "i32", "u16"], result: "void" },
  nfct_set_attr_u32: { parameters: ["pointer", "i32", "u32"], result: "void" },
  nfct_nlmsg_build: { parameters: ["pointer", "pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The three opened libraries. */
export interface ConntrackLibs {
  /** libnetfilter_conntrack. */
  nfct: Deno.DynamicLibrary<typeof NFCT_SYMBOLS>["symbols"];
  /** libmnl (the delete socket). */
  mnl: Mnl;
  /** libc (errno). */
  libc: Libc;
}

let cached: ConntrackLibs | undefined;

/**
 * Opens (once per process) libnetfilter_conntrack, libmnl and libc.
 *
 * @throws LibraryNotFoundError naming the package to install.
 */
export function loadConntrackLibs(): ConntrackLibs {
  if (cached !== undefined) return cached;
  const nfct = openLibrary("libnetfilter_conntrack.so.3", NFCT_SYMBOLS).symbols;
  cached = { nfct, mnl: libmnl(), libc: libc() };
  return cached;
}

export { lastErrno } from "../libc.ts";

/** `ENOENT (No such file or directory)`: name plus libc's description. */
export function describeErrno(errno: number): string {
  const text = strerror(errno);
  return text === "" ? errnoName(errno) : `${errnoName(errno)} (${text})`;
}
