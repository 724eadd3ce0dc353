/**
 * glibc `malloc_trim(0)`: hands memory that libnftables freed back to the
 * OS. libnftables allocates hundreds of MB for a big script and glibc keeps
 * the arenas otherwise.
 *
 * @module
 */
import { dlopen } from "./native.ts";

let libc: { symbols: { malloc_trim: (pad: number | bigint) => number } } | null | undefined;

/** Calls glibc malloc_trim(0); a no-op where FFI is not allowed or libc has no such symbol. */
export function mallocTrim(): void {
  if (libc === undefined) {
    try {
      libc = dlopen("libc.so.6", {
        malloc_trim: { parameters: ["usize"], result: "i32" },
      }) as unknown as typeof libc;
    } catch {
      libc = null;
    }
  }
  libc?.symbols.malloc_trim(0);
}
