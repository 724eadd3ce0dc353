/**
 * The one binding of libmnl.so.0 (which libnftables and
 * libnetfilter_conntrack need anyway): the socket calls behind both the
 * nf_tables and the ctnetlink paths, opened once per process.
 *
 * @module
 */
import { lazyLibrary } from "../libpath.ts";

/** The libmnl calls bound, as Deno.dlopen declares them ({@link Mnl} is their bound form). */
export const SYMBOLS = {
  mnl_socket_open: { parameters: ["i32"], result: "pointer" },
  mnl_socket_bind: { parameters: ["pointer", "u32", "i32"], result: "i32" },
  mnl_socket_get_fd: { parameters: ["pointer"], result: "i32" },
  mnl_socket_get_portid: { parameters: ["pointer"], result: "u32" },
  mnl_socket_setsockopt: { parameters: ["pointer", "i32", "buffer", "u32"], result: "i32" },
  mnl_socket_sendto: { parameters: ["pointer", "buffer", "usize"], result: "isize" },
  // The same call on a worker thread: the kernel applies a big nf_tables batch inside it.
  mnl_socket_sendto_async: {
    name: "mnl_socket_sendto",
    parameters: ["pointer", "buffer", "usize"],
    result: "isize",
    nonblocking: true,
  },
  mnl_socket_recvfrom: { parameters: ["pointer", "buffer", "usize"], result: "isize" },
  mnl_socket_close: { parameters: ["pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The libmnl symbols bound here. */
export type Mnl = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/**
 * libmnl.so.0, opened on first use.
 *
 * @throws LibraryNotFoundError naming the package to install.
 */
export const libmnl: () => Mnl = lazyLibrary("libmnl.so.0", SYMBOLS);
