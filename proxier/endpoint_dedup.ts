/**
 * Which copy of an endpoint address wins when it is listed twice in one Service's
 * EndpointSlices (kube-proxy 1.36, kubernetes#135266 / PR #135593, endpointslicecache.go's
 * addEndpoints). Two cases look alike and need opposite answers:
 *
 * - the same Pod (same targetRef) in two slices: the EndpointSlice controller is moving the
 *   endpoint, and the copy from the more recently written slice has the current conditions,
 *   terminating or not;
 * - two different Pods with the same IP: the pod network reused the address of a Pod that is
 *   still terminating; the live (non-terminating) Pod owns the address now, whichever slice
 *   was written last.
 *
 * Upstream applies the second rule to both (its comment says the first would be better but it
 * cannot tell which slice is newer) and leaves a tie to Go's map order. We know the order the
 * slices were last written (a write that changes nothing we read counts too: the controller
 * writes every endpoint of a slice from the Pods' state at that time), so: the same Pod takes
 * the newer copy; otherwise a non-terminating copy beats a terminating one; otherwise (both
 * live, or both terminating) the newer copy wins. Within one slice a later position is newer.
 * An endpoint without a targetRef counts as a different Pod.
 *
 * @module
 */

import type { Endpoint } from "./k8s_types.ts";

/** No targetRef. */
export const NO_TARGET = 0;

/**
 * A compact identity of an endpoint's targetRef (the uid, else kind/namespace/name), or
 * {@link NO_TARGET}. A 31-bit FNV-1a hash, so the per-endpoint cost is one small integer:
 * two different Pods on one address collide with odds of 1 in 2^31, and a collision only
 * makes the newer copy win, as for a moved endpoint.
 */
export function targetId(ref: Endpoint["targetRef"]): number {
  if (!ref) return NO_TARGET;
  // The hash of `u:<uid>`, else of `<kind>/<namespace>/<name>`, taken part by part: no key
  // string is built for each of hundreds of thousands of endpoints.
  let h: number;
  if (ref.uid) h = fnv(fnv(FNV_OFFSET, "u:"), String(ref.uid));
  else if (ref.name) {
    h = fnv(fnv(fnv(FNV_OFFSET, String(ref.kind)), "/"), String(ref.namespace));
    h = fnv(fnv(h, "/"), ref.name);
  } else return NO_TARGET;
  return (h >>> 1) || 1;
}

const FNV_OFFSET = 0x811c9dc5;

/** 32-bit FNV-1a of `s` continued from `h`. */
function fnv(h: number, s: string): number {
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h;
}

/**
 * Whether the newer copy `cur` (target `curT`) replaces the older copy `old` (target `oldT`)
 * of the same address and port.
 */
export function newerWins(
  old: { terminating: boolean },
  oldT: number,
  cur: { terminating: boolean },
  curT: number,
): boolean {
  if (curT !== NO_TARGET && curT === oldT) return true;
  return !cur.terminating || old.terminating;
}
