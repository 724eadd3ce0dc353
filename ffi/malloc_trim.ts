/**
 * glibc's allocator, kept from hoarding what the process frees. libnftables allocates hundreds
 * of MB for a big script, and the API lists' response buffers come and go by the thousand;
 * glibc keeps both in its arenas otherwise. The start-up lists are the exception: there, reusing
 * the buffers matters more than handing them back ({@link tuneMalloc}, {@link settleMalloc}).
 *
 * @module
 */
import { type Libc, libc } from "./libc.ts";

/** libc, or null without glibc (or with native loading refused): then these are no-ops. */
function openLibc(): Libc | null {
  try {
    return libc();
  } catch {
    return null;
  }
}

/** mallopt parameters (malloc.h). */
const M_TRIM_THRESHOLD = -1;
const M_MMAP_THRESHOLD = -3;

/** The thresholds while the API lists come in: page buffers are reused from the heap. */
const LIST_MMAP_THRESHOLD = 32 * 1024 * 1024; // glibc's maximum
const LIST_TRIM_THRESHOLD = 256 * 1024 * 1024;
/** The thresholds afterwards: glibc's initial values, fixed. */
const STEADY_THRESHOLD = 128 * 1024;

/**
 * Allocator thresholds for the start-up lists; {@link settleMalloc} ends them. Each list page's
 * buffers are megabytes: with a low mmap threshold every one is a fresh mapping, faulted in page
 * by page and unmapped again. At a 30k-Service cold start that was 48k of the main thread's 107k
 * page faults, and the lists took 2.9-3.2 s instead of 2.0 s (60k: 7.1 s against 4.8 s). A
 * no-op without glibc.
 */
export function tuneMalloc(): void {
  const c = openLibc();
  if (c === null) return;
  c.mallopt(M_MMAP_THRESHOLD, LIST_MMAP_THRESHOLD);
  c.mallopt(M_TRIM_THRESHOLD, LIST_TRIM_THRESHOLD);
}

/**
 * Once the lists are in: fixed 128 KiB thresholds, and what the lists freed goes back to the
 * system. glibc otherwise raises the mmap threshold to the size of every mmapped block freed:
 * buffers then land in the arenas, which fragment (190 MB of native memory before a 30k first
 * sync, 76 MB with fixed thresholds). A no-op without glibc.
 */
export function settleMalloc(): void {
  const c = openLibc();
  if (c === null) return;
  c.mallopt(M_MMAP_THRESHOLD, STEADY_THRESHOLD);
  c.mallopt(M_TRIM_THRESHOLD, STEADY_THRESHOLD);
  c.malloc_trim(0n);
}

/** How long a trim waits, at a time, while a change is waiting. */
const DEFER_MS = 250;

let waiting: (() => boolean) | undefined;
let retry: ReturnType<typeof setTimeout> | undefined;

/**
 * While `busy()` is true (a change is waiting to be synced), {@link mallocTrim} waits: the
 * compacting collection stops the event loop for up to a second at 60k Services, and a waiting
 * change should not sit behind it. undefined stops deferring.
 */
export function deferTrimWhile(busy: (() => boolean) | undefined): void {
  waiting = busy;
}

/** What runs once the pending trim has run (its callers' `then`). */
let after: (() => void)[] = [];

/**
 * Runs `trim` now, or, while {@link deferTrimWhile}'s predicate says a change is waiting, once it
 * no longer does (rechecked every 250 ms; requests meanwhile are one). Each request's `then` runs
 * on a later turn once the trim has run, however long it waited. The retry timer does not keep
 * the process alive.
 */
export function requestTrim(trim: () => void, then?: () => void): void {
  if (then !== undefined) after.push(then);
  if (retry !== undefined) return;
  if (waiting?.() !== true) {
    trim();
    const next = after;
    after = [];
    for (const f of next) setTimeout(f, 0);
    return;
  }
  const t = setTimeout(() => {
    retry = undefined;
    requestTrim(trim);
  }, DEFER_MS);
  retry = t;
  Deno.unrefTimer(t);
}

/**
 * After a big sync: a memory-reducing V8 collection when the runtime exposes `gc` (the start
 * task passes --expose-gc), then glibc malloc_trim(0), deferred while a change is waiting (see
 * {@link deferTrimWhile}). A no-op where neither is available.
 *
 * A plain `gc()` frees the garbage but keeps the pages a cold start committed (at 30k Services,
 * 320 MB committed for 200 MB live). The "last-resort" flavor compacts, and with
 * --compaction-max-evacuated-bytes-mb-for-reduce-memory raised in the start task it compacts
 * the whole heap, so the committed size falls to what is live. It pauses the loop (0.6 s at
 * 30k Services): callers run it once a big sync is done, never inside one. `then` runs after it,
 * on a later turn (see {@link requestTrim}).
 */
export function mallocTrim(then?: () => void): void {
  requestTrim(trimNow, then);
}

let trims = 0;

/**
 * How many trims have run in this process. Memory a trim hands back is faulted in again by the
 * next code that uses it, so a warm-up done before the last trim is undone by it.
 */
export function trimsDone(): number {
  return trims;
}

function trimNow(): void {
  const gc = (globalThis as { gc?: (options?: unknown) => void }).gc;
  if (typeof gc === "function") gc({ type: "major", execution: "sync", flavor: "last-resort" });
  openLibc()?.malloc_trim(0n);
  trims++;
}
