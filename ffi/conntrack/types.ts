/**
 * Conntrack records and the client interface implemented by the FFI binding
 * and by the in-memory fake.
 *
 * @module
 */

import type { IpFamily } from "../../net/family.ts";

/** IP protocol numbers we care about. */
export const PROTO_TCP = 6;
/** UDP. */
export const PROTO_UDP = 17;
/** SCTP. */
export const PROTO_SCTP = 132;

/**
 * One conntrack entry. Addresses are canonical text (`198.18.0.1`,
 * `2001:db8::1`); ports are host-order numbers (0 for portless protocols).
 * `id` is the kernel's CTA_ID, used to make deletes exact.
 */
export interface ConntrackEntry {
  /** 4 or 6. */
  family: IpFamily;
  /** IP protocol number (6 TCP, 17 UDP, 132 SCTP). */
  proto: number;
  /** Original direction: source address. */
  origSrc: string;
  /** Original direction: destination address (a Service IP before DNAT). */
  origDst: string;
  /** Original direction: source port. */
  origSport: number;
  /** Original direction: destination port. */
  origDport: number;
  /** Reply direction: source address (the endpoint after DNAT). */
  replySrc: string;
  /** Reply direction: destination address. */
  replyDst: string;
  /** Reply direction: source port. */
  replySport: number;
  /** Reply direction: destination port. */
  replyDport: number;
  /** The connection mark. */
  mark: number;
  /** The conntrack zone. */
  zone: number;
  /** The kernel's CTA_ID (0 = unknown). */
  id: number;
}

/** A zeroed entry, for dump code that fills one object in place per flow. */
export function emptyConntrackEntry(): ConntrackEntry {
  return {
    family: 4,
    proto: 0,
    origSrc: "",
    origDst: "",
    origSport: 0,
    origDport: 0,
    replySrc: "",
    replyDst: "",
    replySport: 0,
    replyDport: 0,
    mark: 0,
    zone: 0,
    id: 0,
  };
}

/** What a dump produced. */
export interface DumpResult {
  /** Entries seen (those passed to the visitor). */
  count: number;
  /** True when the kernel interrupted the dump (EINTR): the entries seen are a partial view. */
  interrupted: boolean;
}

/** What a delete did. */
export interface DeleteResult {
  /** How many entries were deleted. */
  deleted: number;
  /** Entries the kernel refused, with its reason (ENOENT: already gone). */
  failed: { entry: ConntrackEntry; error: string }[];
}

/** Access to the conntrack table of the current network namespace. */
export interface ConntrackClient {
  /**
   * Streams the entries of one family to `visit`, optionally only of one L4
   * protocol. The entry object passed may be reused between calls: copy what
   * you keep. Memory stays bounded by what the visitor keeps.
   */
  dump(family: IpFamily, visit: (e: Readonly<ConntrackEntry>) => void, proto?: number): DumpResult;
  /** Deletes the given entries (matching on the original tuple, and on `id` where supported). */
  delete(entries: readonly ConntrackEntry[]): DeleteResult;
  /** Releases native resources. */
  close(): void;
}

/** A native library could not be loaded. The message names the package to install. */
export class LibraryNotFoundError extends Error {
  /** `library` could not be opened; `packages` name what provides it. */
  constructor(readonly library: string, readonly packages: string, cause?: unknown) {
    super(
      `cannot load ${library}: install it (${packages}) or point KUBE_NFT_PROXY_LIB_DIR at the directory holding it` +
        (cause instanceof Error ? ` (${cause.message.split("\n")[0]})` : ""),
    );
    this.name = "LibraryNotFoundError";
  }
}
