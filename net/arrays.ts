/**
 * List equality, for the change trackers and planners that compare what they hold with what
 * they were given (order matters everywhere: the lists are canonical).
 *
 * @module
 */

/** Whether two lists hold the same strings in the same order; two missing lists are equal. */
export function sameStrings(
  a: readonly string[] | undefined,
  b: readonly string[] | undefined,
): boolean {
  if (a === b) return true;
  if (!a || !b) return false;
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** Whether `keys` is `items` mapped through `key`, in order (without building the mapped list). */
export function sameKeys<T>(
  keys: readonly string[],
  items: readonly T[],
  key: (item: T) => string,
): boolean {
  return keys.length === items.length && items.every((v, i) => keys[i] === key(v));
}
