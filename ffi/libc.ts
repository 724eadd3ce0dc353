/**
 * The one binding of the C library: every libc call this program makes
 * (allocator tuning, small kernel files, memfd for libnftables' file input,
 * socket options and errno for netlink), opened once per process through
 * ffi/native.ts's gate, so KNP_REFUSE_NATIVE=1 refuses it like the rest.
 *
 * @module
 */
import { lazyLibrary } from "./libpath.ts";

/** The libc symbols the agent binds. */
export const SYMBOLS = {
  malloc_trim: { parameters: ["usize"], result: "i32" },
  mallopt: { parameters: ["i32", "i32"], result: "i32" },
  open: { parameters: ["buffer", "i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
  memfd_create: { parameters: ["buffer", "u32"], result: "i32" },
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  recv: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  getsockname: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  // Waits for a socket on a worker thread (nftables notifications); errno stays there, so
  // the receive that follows runs on the calling thread.
  poll_async: {
    name: "poll",
    parameters: ["buffer", "u64", "i32"],
    result: "i32",
    nonblocking: true,
  },
  getrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  setrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
  strerror: { parameters: ["i32"], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The libc symbols bound here. */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/**
 * libc.so.6, opened on first use.
 *
 * @throws LibraryNotFoundError without glibc, or under KNP_REFUSE_NATIVE=1.
 */
export const libc: () => Libc = lazyLibrary("libc.so.6", SYMBOLS);

/** The calling thread's errno. Read it right after the failing call. */
export function lastErrno(): number {
  const p = libc().__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
}

/** strerror(3)'s text for `errno` (the words libnftables' messages use too). */
export function strerror(errno: number): string {
  const p = libc().strerror(errno);
  return p === null ? `errno ${errno}` : Deno.UnsafePointerView.getCString(p);
}
