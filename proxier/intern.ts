/**
 * One shared copy of strings that repeat across API objects (node and zone names, namespaces,
 * protocols, port names): JSON.parse makes a fresh copy of every occurrence, and the trackers
 * keep hundreds of thousands of them. Bounded, so a hostile stream of distinct names cannot
 * grow it without end: past the bound, strings are returned as they are.
 *
 * @module
 */

/** Distinct strings kept at most. */
const INTERN_MAX = 100_000;

const interned = new Map<string, string>();

/** The shared copy of `v` when it is a string; anything else as it is. */
export function intern<T>(v: T): T {
  if (typeof v !== "string") return v;
  const hit = interned.get(v);
  if (hit !== undefined) return hit as T;
  if (interned.size < INTERN_MAX) interned.set(v, v);
  return v;
}
