/**
 * glibc `malloc_trim(0)`: hands memory that libnftables freed back to the
 * OS. libnftables allocates hundreds of MB for a big script and glibc keeps
 * the arenas otherwise.
 *
 * @module
 */
import { dlopen } from "./native.ts";

let libc: { symbols: { malloc_trim: (pad: number | bigint) => number } } | null | undefined;

/**
 * After a big sync: a full V8 collection when the runtime exposes `gc` (the start task passes
 * --expose-gc), so the heap grown by a cold start shrinks to what is live, then glibc
 * malloc_trim(0). A no-op where neither is available.
 */
export function mallocTrim(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc === "function") gc();
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
