/**
 * The merge of one Service's EndpointSlices into endpoint lists per port, and the slice
 * types it works on (kube-proxy's endpointslicecache.go endpointInfoByServicePort). Duplicate
 * addresses are decided by endpoint_dedup.ts in update order.
 *
 * @module
 */

import { type ParsedIP, parseIPv4Number, parseIPv6Bytes } from "../net/ip.ts";
import type { IpFamily } from "../net/family.ts";
import type { EndpointInfo } from "./model.ts";
import { PackedEndpoint } from "./packed_endpoint.ts";
import { newerWins, NO_TARGET } from "./endpoint_dedup.ts";

/** One port of a validated slice with its endpoints, ready to use. */
export interface SlicePort {
  /** portKey() of the Service port this slice port serves (endpoints_tracker.ts). */
  key: string;
  /** The endpoints' port. */
  port: number;
  /** Sorted by address; an address appears once. Shared with the merged lists: do not mutate. */
  endpoints: EndpointInfo[];
}

/** A validated EndpointSlice. */
export interface ParsedSlice {
  /** `namespace/service-name`. */
  service: string;
  /** Slice name. */
  name: string;
  /** The slice's address family. */
  family: IpFamily;
  /** Its valid ports, each with its endpoints. */
  ports: SlicePort[];
  /**
   * The {@link targetId} of each endpoint, in the order of every port's `endpoints`; omitted
   * when no endpoint has a targetRef. Decides duplicates across slices (endpoint_dedup.ts).
   */
  targets?: number[];
}

/** A sort key ordering addresses of one family numerically. */
export function sortKeyOf(ip: ParsedIP): number | string {
  const b = ip.bytes;
  if (ip.family === 4) return ((b[0] << 24) >>> 0) + (b[1] << 16) + (b[2] << 8) + b[3];
  return hexKey(b);
}

/** The 16 bytes of an IPv6 address as 32 hex digits (they sort as the address does). */
export function hexKey(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < 16; i++) s += HEX2[b[i]];
  return s;
}

const HEX2 = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** Scratch bytes of {@link addressKey}: one address at a time, never kept. */
const SCRATCH = new Uint8Array(16);

/**
 * The {@link sortKeyOf} key of address text `s` of `family`, or null when it is not such an
 * address; parses without allocating an address object.
 */
export function addressKey(s: string, family: IpFamily): number | string | null {
  if (family === 4) {
    const v = parseIPv4Number(s, 0, s.length);
    return v < 0 ? null : v;
  }
  return s.includes(":") && parseIPv6Bytes(s, SCRATCH, 0) ? hexKey(SCRATCH) : null;
}

/** Orders two {@link sortKeyOf} keys. */
export function compareKeys(a: number | string, b: number | string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One copy of an endpoint while slices are merged: its address's sort key and its target. */
interface Copy {
  k: number | string;
  ep: EndpointInfo;
  t: number;
}

/** A slice as the tracker keeps it. */
export interface StoredSlice {
  /** The parsed slice. */
  slice: ParsedSlice;
  /** Update sequence: higher is fresher. */
  seq: number;
}

/** Whether an endpoint address of `slice` is also listed by another of `siblings`. */
export function sharesAddress(slice: ParsedSlice, siblings: Map<string, StoredSlice>): boolean {
  const mine = new Set<number | string>();
  for (const p of slice.ports) for (const e of p.endpoints) mine.add(endpointKey(e));
  for (const [name, s] of siblings) {
    if (name === slice.name) continue;
    for (const p of s.slice.ports) {
      for (const e of p.endpoints) if (mine.has(endpointKey(e))) return true;
    }
  }
  return false;
}

/**
 * The {@link sortKeyOf} key of a stored endpoint's address: a packed IPv4 address is its key
 * already (reading `ip` would format it, only to be parsed back here).
 */
function endpointKey(ep: EndpointInfo): number | string {
  const v4 = ep instanceof PackedEndpoint ? ep.v4 : undefined;
  if (v4 !== undefined) return v4;
  // Stored addresses are canonical; the family follows from the text.
  return addressKey(ep.ip, ep.ip.includes(":") ? 6 : 4)!;
}

/**
 * Merges the slices of one Service into endpoint lists per port. An endpoint (address +
 * port) in several slices is decided by endpoint_dedup.ts in update order: the same Pod
 * takes the most recently updated slice's copy (it is moving between slices); different
 * Pods on one address (reused while the old Pod terminates) prefer the non-terminating one.
 */
export function mergeSlices(
  slices: Iterable<{ slice: ParsedSlice; seq: number }>,
): Map<string, EndpointInfo[]> {
  const ordered = [...slices].sort((a, b) => a.seq - b.seq);
  const out = new Map<string, EndpointInfo[]>();
  if (ordered.length === 1) {
    // The common case: one slice, already sorted and de-duplicated.
    for (const p of ordered[0].slice.ports) if (p.endpoints.length > 0) out.set(p.key, p.endpoints);
    return out;
  }
  // Every copy, tagged with its address's sort key, in update order; a stable sort by address
  // and port then puts the copies of one endpoint side by side, oldest first. The slices are
  // each sorted already, so the sort merges runs.
  const byPort = new Map<string, Copy[]>();
  for (const { slice } of ordered) {
    for (const p of slice.ports) {
      let list = byPort.get(p.key);
      if (!list) byPort.set(p.key, list = []);
      for (let i = 0; i < p.endpoints.length; i++) {
        const ep = p.endpoints[i];
        list.push({ k: endpointKey(ep), ep, t: slice.targets?.[i] ?? NO_TARGET });
      }
    }
  }
  for (const [pk, copies] of byPort) {
    if (copies.length === 0) continue;
    copies.sort((a, b) => compareKeys(a.k, b.k) || a.ep.port - b.ep.port);
    const list: EndpointInfo[] = [];
    let win = copies[0];
    for (let i = 1; i <= copies.length; i++) {
      const c = copies[i];
      if (c !== undefined && c.k === win.k && c.ep.port === win.ep.port) {
        if (newerWins(win.ep, win.t, c.ep, c.t)) win = c;
        continue;
      }
      list.push(win.ep);
      if (c !== undefined) win = c;
    }
    out.set(pk, list);
  }
  return out;
}
