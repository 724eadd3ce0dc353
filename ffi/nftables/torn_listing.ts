/**
 * Listings torn by a hash set's resize. After a commit the kernel grows or
 * shrinks a hash set's bucket table in a worker, off the commit path. A dump
 * that overlaps that resize walks the old and the new bucket table and can
 * list an element twice; when the dump spans several netlink messages, the
 * next message resumes by count, so it then skips as many elements as were
 * repeated. A key is in a set at most once, so a listing with no repeated key
 * is whole, and one with a repeat is read again.
 *
 * Measured on kernel 6.18 (a 120-element verdict map, 80 elements deleted and
 * added back before each listing): 11 of 2000 listings repeated keys.
 *
 * @module
 */
import type { Element, TableState } from "./types.ts";

/** How many times a torn listing is read before its repeats are dropped. */
export const LISTING_ATTEMPTS = 3;
/** A resize takes a worker a few milliseconds: the next read waits this long. */
const RETRY_DELAY_MS = 5;

let tornSeen = 0;

/** Listings read torn since the process started (every read, retried ones included). */
export function tornListingsSeen(): number {
  return tornSeen;
}

/** Drops the elements whose key an earlier element of the same set or map had; returns how many. */
export function dropRepeatedElements(state: TableState): number {
  let dropped = 0;
  for (const entry of [...state.sets.values(), ...state.maps.values()]) {
    const kept = uniqueByKey(entry.elements);
    dropped += entry.elements.length - kept.length;
    entry.elements = kept;
  }
  return dropped;
}

function uniqueByKey(elements: Element[]): Element[] {
  const seen = new Set<string>();
  const out: Element[] = [];
  for (const e of elements) {
    const k = e.key.join(" . ");
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(e);
  }
  return out.length === elements.length ? elements : out;
}

/**
 * Reads a listing with `read` and parses it with `parse`, reading again while
 * it repeats a key (up to {@link LISTING_ATTEMPTS} reads). A listing still torn
 * after the last read is returned without its repeats.
 */
export async function readWholeListing(
  read: () => Promise<string | null>,
  parse: (text: string) => TableState | null,
): Promise<TableState | null> {
  for (let attempt = 1;; attempt++) {
    const text = await read();
    const state = text === null ? null : parse(text);
    if (state === null || dropRepeatedElements(state) === 0) return state;
    tornSeen++;
    if (attempt >= LISTING_ATTEMPTS) return state;
    await new Promise((r) => setTimeout(r, RETRY_DELAY_MS));
  }
}
