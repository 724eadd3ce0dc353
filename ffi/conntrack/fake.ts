/**
 * An in-memory conntrack table implementing {@link ConntrackClient}, for unit
 * tests and CPU/memory benchmarks of the cleanup logic. It behaves like the
 * kernel where the callers can tell: dumps stream one reused object, can be
 * cut short as an interrupted (EINTR) dump would be, and deletes match the
 * original tuple plus the id (when non-zero), reporting ENOENT otherwise.
 *
 * @module
 */

import { familyOfText, type IpFamily } from "../../net/family.ts";
import type { ConntrackClient, ConntrackEntry, DeleteResult, DumpResult } from "./types.ts";
import { emptyConntrackEntry, PROTO_UDP } from "./types.ts";

/** Fields a test must give; the rest default (UDP, reply = reverse of original, ids assigned). */
export type FakeEntryInput =
  & Pick<ConntrackEntry, "origSrc" | "origDst" | "origSport" | "origDport">
  & Partial<ConntrackEntry>;

/** The kernel keys a flow by its original tuple within a zone. */
function tupleKey(e: Readonly<ConntrackEntry>): string {
  return `${e.family}|${e.proto}|${e.zone}|${e.origSrc}|${e.origSport}|${e.origDst}|${e.origDport}`;
}

/** In-memory conntrack table. */
export class FakeConntrack implements ConntrackClient {
  readonly #table = new Map<string, ConntrackEntry>();
  #nextId = 1;
  #closed = false;
  /** When set, the next dump stops after this many entries and reports `interrupted`. One-shot. */
  interruptNextDumpAfter: number | undefined;
  /** Number of dump calls so far. */
  dumpCalls = 0;
  /** Sizes of the delete batches received, in order. */
  readonly deleteBatches: number[] = [];

  /** Creates a table holding `entries`. */
  constructor(entries: readonly FakeEntryInput[] = []) {
    for (const e of entries) this.add(e);
  }

  /**
   * Adds a flow. Family is taken from the address when not given; the reply
   * tuple defaults to the reverse of the original (no NAT); ids are assigned
   * from a counter unless given. Returns the stored entry.
   * Throws on a duplicate original tuple, as the kernel does (EEXIST).
   */
  add(input: FakeEntryInput): ConntrackEntry {
    const family: IpFamily = input.family ?? familyOfText(input.origDst);
    const e: ConntrackEntry = {
      family,
      proto: input.proto ?? PROTO_UDP,
      origSrc: input.origSrc,
      origDst: input.origDst,
      origSport: input.origSport,
      origDport: input.origDport,
      replySrc: input.replySrc ?? input.origDst,
      replyDst: input.replyDst ?? input.origSrc,
      replySport: input.replySport ?? input.origDport,
      replyDport: input.replyDport ?? input.origSport,
      mark: input.mark ?? 0,
      zone: input.zone ?? 0,
      id: input.id ?? this.#nextId++,
    };
    const key = tupleKey(e);
    if (this.#table.has(key)) {
      throw new Error(
        `fake conntrack: an entry with original tuple ${key} already exists (EEXIST)`,
      );
    }
    this.#table.set(key, e);
    return e;
  }

  /** Number of entries in the table. */
  get size(): number {
    return this.#table.size;
  }

  /** Copies of all entries, for assertions. */
  entries(): ConntrackEntry[] {
    return [...this.#table.values()].map((e) => ({ ...e }));
  }

  /** Whether a flow with this original tuple (and family/proto/zone) is present. */
  has(e: Readonly<ConntrackEntry>): boolean {
    return this.#table.has(tupleKey(e));
  }

  /** Streams matching entries through one reused object, like the FFI client. */
  dump(
    family: IpFamily,
    visit: (e: Readonly<ConntrackEntry>) => void,
    proto?: number,
  ): DumpResult {
    this.#assertOpen();
    this.dumpCalls++;
    const limit = this.interruptNextDumpAfter;
    this.interruptNextDumpAfter = undefined;
    const scratch = emptyConntrackEntry();
    let count = 0;
    for (const e of this.#table.values()) {
      if (e.family !== family || (proto !== undefined && e.proto !== proto)) continue;
      if (limit !== undefined && count >= limit) return { count, interrupted: true };
      Object.assign(scratch, e);
      visit(scratch);
      count++;
    }
    return { count, interrupted: false };
  }

  /** Deletes by original tuple; a non-zero id must match too (else ENOENT, like CTA_ID). */
  delete(entries: readonly ConntrackEntry[]): DeleteResult {
    this.#assertOpen();
    this.deleteBatches.push(entries.length);
    const result: DeleteResult = { deleted: 0, failed: [] };
    for (const e of entries) {
      const key = tupleKey(e);
      const stored = this.#table.get(key);
      if (stored === undefined || (e.id !== 0 && stored.id !== e.id)) {
        result.failed.push({ entry: e, error: "ENOENT" });
        continue;
      }
      this.#table.delete(key);
      result.deleted++;
    }
    return result;
  }

  /** Marks the client closed; later calls throw. */
  close(): void {
    this.#closed = true;
  }

  /** Throws once the client is closed. */
  #assertOpen(): void {
    if (this.#closed) throw new Error("fake conntrack: client used after close()");
  }
}

/**
 * Factory with the shape the reconcile Worker expects (module + export name +
 * cloneable arguments), so Worker tests can run against the fake.
 */
export function openFakeConntrack(
  entries: readonly FakeEntryInput[] = [],
  opts: { interruptAfter?: number } = {},
): FakeConntrack {
  const ct = new FakeConntrack(entries);
  ct.interruptNextDumpAfter = opts.interruptAfter;
  return ct;
}
