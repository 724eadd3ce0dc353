/**
 * The raw path for element-only transactions: knows the layout of the
 * table's sets (learned from the declarations the client applies, or read
 * once with a terse listing), encodes a transaction as one netlink batch and
 * sends it. Anything it cannot encode is left to libnftables.
 *
 * @module
 */
import type { Map as NftMap, Operation, Set as NftSet } from "../types.ts";
import { type Batch, encodeBatch, layoutOf, type SetLayout } from "./codec.ts";
import { NetfilterSocket } from "../../netlink/socket.ts";
import { collectGenerations, QUIET_MIN_ELEMENTS, type QuietWrites } from "./generation.ts";

/** Raw element writer for one table. */
export class RawElementWriter {
  readonly #layouts = new Map<string, SetLayout | null>();
  #socket: NetfilterSocket | null | undefined;
  #seq = 1;
  /** Pauses change notifications around a large batch (generation.ts); none: never paused. */
  quiet: QuietWrites | undefined;

  /** A writer for table `table` of nft family `family`; the socket opens on the first write. */
  constructor(readonly family: string, readonly table: string) {}

  /** Records set declarations and deletions a transaction made (call after it succeeded). */
  learn(ops: readonly Operation[]): void {
    for (const { verb, obj } of ops) {
      if (obj.kind === "table" && verb === "delete") this.#layouts.clear();
      if (obj.kind !== "set" && obj.kind !== "map") continue;
      if (verb === "add" || verb === "create") this.#layouts.set(obj.name, layoutOf(obj) ?? null);
      else if (verb === "delete") this.#layouts.delete(obj.name);
    }
  }

  /** Records declarations read from the kernel. */
  learnDeclarations(sets: readonly (NftSet | NftMap)[]): void {
    for (const s of sets) this.#layouts.set(s.name, layoutOf(s) ?? null);
  }

  /** The layout of set `name`: undefined when not known yet, null when not encodable. */
  layoutOf(name: string): SetLayout | null | undefined {
    return this.#layouts.get(name);
  }

  /** Element targets of `ops` whose layout is not known yet (empty: ready to encode). */
  unknownTargets(ops: readonly Operation[]): string[] {
    const out = new Set<string>();
    for (const { obj } of ops) {
      if (obj.kind !== "element") continue;
      const t = obj.map ?? obj.set;
      if (t !== undefined && !this.#layouts.has(t)) out.add(t);
    }
    return [...out];
  }

  /** The batch for `ops`, or undefined when they are not all encodable element operations. */
  encode(ops: readonly Operation[]): Batch | undefined {
    const batch = this.#encode(ops, this.#seq);
    if (batch !== undefined) this.#seq = (batch.seqs.at(-1)! + 2) >>> 0 || 1;
    return batch;
  }

  /**
   * Encodes `ops` as {@link encode} does, for nothing: the batch is dropped, no seq is used.
   * True when they were encodable.
   */
  rehearse(ops: readonly Operation[]): boolean {
    return this.#encode(ops, 1) !== undefined;
  }

  #encode(ops: readonly Operation[], seq: number): Batch | undefined {
    const layout = (name: string) => this.#layouts.get(name) ?? undefined;
    return encodeBatch(this.family, this.table, ops, layout, seq);
  }

  /**
   * Sends a batch; true when the kernel acked every message. False means
   * nothing was applied (the batch is atomic), or no socket could be opened.
   */
  async send(batch: Batch): Promise<boolean> {
    if (this.#socket === undefined) {
      try {
        this.#socket = new NetfilterSocket();
      } catch {
        this.#socket = null; // no libmnl or no permission: libnftables does it all
      }
    }
    if (this.#socket === null) return false;
    const q = batch.elements >= QUIET_MIN_ELEMENTS ? this.quiet : undefined;
    let acks: Map<number, number>;
    if (q === undefined) {
      // A change's small batch: its generation id is of no use, so its replies are not decoded.
      ({ acks } = await this.#socket.send(batch));
    } else {
      const own: number[] = [];
      q.begin();
      try {
        ({ acks } = await this.#socket.send(batch, (b, len) => collectGenerations(b, len, own)));
      } finally {
        q.end(own);
      }
    }
    // A commit-time failure is acked on the batch-begin message, whose seq is not among ours:
    // any error at all means the batch was aborted.
    for (const e of acks.values()) if (e !== 0) return false;
    return batch.seqs.every((s) => acks.get(s) === 0);
  }

  /** Closes the netlink socket, if one was opened. */
  close(): void {
    this.#socket?.close();
  }
}
