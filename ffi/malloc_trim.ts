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
 * After a big sync: a memory-reducing V8 collection when the runtime exposes `gc` (the start
 * task passes --expose-gc), then glibc malloc_trim(0). A no-op where neither is available.
 *
 * A plain `gc()` frees the garbage but keeps the pages a cold start committed (at 30k Services,
 * 320 MB committed for 200 MB live). The "last-resort" flavor compacts, and with
 * --compaction-max-evacuated-bytes-mb-for-reduce-memory raised in the start task it compacts
 * the whole heap, so the committed size falls to what is live. It pauses the loop (0.6 s at
 * 30k Services): callers run it once a big sync is done, never inside one.
 */
export function mallocTrim(): void {
  const gc = (globalThis as { gc?: (options?: unknown) => void }).gc;
  if (typeof gc === "function") gc({ type: "major", execution: "sync", flavor: "last-resort" });
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
