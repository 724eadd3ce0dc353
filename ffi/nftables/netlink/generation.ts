/**
 * The ruleset generation id, and quiet windows: our large writes without the
 * kernel building a change notification for every element.
 *
 * While any socket listens to NFNLGRP_NFTABLES, a commit builds one netlink
 * message per element it adds or deletes. Our own monitor listens (and drops
 * our messages with a socket filter, after the kernel built them): measured
 * on 6.18, 100k elements take the kernel ~0.12 s with no listener and
 * 0.25-0.97 s with one. So around a large batch of ours the monitor leaves
 * the group, and what it did not see is accounted for by generation ids:
 * every commit bumps the id by one, and each of our batches asks for its own
 * commit's id back (NLM_F_ECHO on the batch begin). An id between the one read
 * before the window and the one read after that is not ours was another
 * program's commit, unseen: the caller then compares the whole ruleset.
 *
 * @module
 */
import { errnoAt, NLM_F_REQUEST, putHeader } from "../../netlink/message.ts";
import { netfilterDump } from "../../netlink/socket.ts";
import { NFT_MSG, nftType } from "./nf_tables.ts";
import { decodeNotifications } from "./notify.ts";

/** Batches of fewer elements than this keep the notifications on: too cheap to matter. */
export const QUIET_MIN_ELEMENTS = 512;

/** Quiet windows around our large batches (the monitor implements it; writer.ts uses it). */
export interface QuietWrites {
  /** A large batch of ours is about to be sent: stop notifications (nestable). */
  begin(): void;
  /** It was answered; `own` are the generation ids it committed (none when it failed). */
  end(own: readonly number[]): void;
}

/** The generation ids that `buf[0, len)` (a batch's replies) echoes back, appended to `out`. */
export function collectGenerations(buf: Uint8Array, len: number, out: number[]): void {
  for (const n of decodeNotifications(buf, len)) {
    if (n.kind === "gen" && n.genId !== undefined) out.push(n.genId);
  }
}

/**
 * The current ruleset generation id (NFT_MSG_GETGEN).
 *
 * @throws Error naming the errno, or when the kernel sent no id.
 */
export function readGenerationId(): number {
  const req = new Uint8Array(20);
  putHeader(new DataView(req.buffer), 0, 20, nftType(NFT_MSG.GETGEN), NLM_F_REQUEST, 1, 0);
  let id: number | undefined;
  netfilterDump("generation", req, (buf, len) => {
    const dv = new DataView(buf.buffer, buf.byteOffset, len);
    const errno = len >= 20 ? errnoAt(dv, 0) : undefined;
    if (errno !== undefined && errno !== 0) return errno;
    const gens: number[] = [];
    collectGenerations(buf, len, gens);
    id = gens[0];
    return id === undefined ? "more" : "done";
  });
  if (id === undefined) throw new Error("netlink generation: no id in the reply");
  return id;
}

/** What a {@link QuietWindow} does to the subscription, and whom it tells. */
export interface QuietWindowOptions {
  /** Reads the ruleset generation id (throws when it cannot). */
  readGeneration(): number;
  /** Leaves (false) or rejoins (true) the notification group; false when that failed. */
  subscribe(on: boolean): boolean;
  /** Commits happened that no notification reported: `why` says which, for the log. */
  onUnseen(why: string): void;
}

/**
 * Nestable quiet windows (one per large batch; two families' batches may
 * overlap): the group is left at the first begin and rejoined at the last
 * end, then every generation id in between must be one of ours.
 */
export class QuietWindow implements QuietWrites {
  #depth = 0;
  /** The id read before leaving; undefined when it could not be read or the group kept. */
  #before: number | undefined;
  #left = false;
  #own = new Set<number>();

  /** A window that reads and subscribes through `o`; nothing happens before {@link begin}. */
  constructor(private readonly o: QuietWindowOptions) {}

  begin(): void {
    if (this.#depth++ > 0) return;
    this.#own.clear();
    try {
      // Read while still subscribed: a commit between the read and the leave is both notified
      // and counted unseen, which costs a needless check, never a missed change.
      this.#before = this.o.readGeneration();
    } catch {
      this.#before = undefined;
      return; // no id to account with: stay subscribed
    }
    this.#left = this.o.subscribe(false);
  }

  end(own: readonly number[]): void {
    for (const g of own) this.#own.add(g);
    if (this.#depth === 0 || --this.#depth > 0) return;
    if (!this.#left) return;
    this.#left = false;
    if (!this.o.subscribe(true)) {
      this.o.onUnseen("rejoining the nftables notification group failed");
      return;
    }
    let after: number;
    try {
      after = this.o.readGeneration();
    } catch (err) {
      this.o.onUnseen(`reading the ruleset generation failed: ${err}`);
      return;
    }
    const unseen = foreignCommits(this.#before!, after, this.#own);
    if (unseen > 0) {
      this.o.onUnseen(
        `${unseen} commit(s) by another program while notifications paused for a large write`,
      );
    }
  }
}

/** Commits in (before, after] (ids wrap at 2^32) that are not in `own`. */
export function foreignCommits(before: number, after: number, own: ReadonlySet<number>): number {
  const span = (after - before) >>> 0;
  if (span > 1 << 20) return span;
  let n = 0;
  for (let i = 1; i <= span; i++) if (!own.has((before + i) >>> 0)) n++;
  return n;
}
