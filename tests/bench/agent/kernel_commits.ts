/**
 * What the kernel committed, read from nf_tables notifications, and which API write each commit
 * answers: the pure half of the big-Deployment phase (big_deployment.ts), kept apart so that it
 * can be tested without the kernel.
 *
 * The kernel sends a committed batch as one message per object it touched (on 6.18 one message
 * per set element, even when the batch carried many elements in one NEWSETELEM), then one
 * NEWGEN. {@link CommitCollector} turns that stream into commits; {@link attribute} matches the
 * commits with the writes that preceded them.
 *
 * @module
 */
import type { NftNotification } from "../../../ffi/nftables/netlink/notify.ts";

/** One committed batch, as the notifications showed it. */
export interface Commit {
  /** When the bench received its NEWGEN (wall-clock ms, as the prober's `now()`). */
  t: number;
  /** The ruleset generation after the commit. */
  genId: number;
  /** Element messages (adds and deletes). */
  elements: number;
  /** Element adds. */
  added: number;
  /** Element deletes. */
  removed: number;
  /** Messages about tables, chains, rules and sets (not elements). */
  objects: number;
  /** Per set (or chain, for rules and chains): "+adds-deletes", for findings. */
  names: Record<string, [number, number]>;
  /**
   * What the kernel holds after it, as the caller tracks it (the big Deployment: the class of
   * its frontend); compared with {@link Write.state}.
   */
  state?: number;
}

/** Groups notifications into commits; a batch split over two receives is joined. */
export class CommitCollector {
  #open: Omit<Commit, "t" | "genId"> = CommitCollector.#empty();

  static #empty(): Omit<Commit, "t" | "genId"> {
    return { elements: 0, added: 0, removed: 0, objects: 0, names: {} };
  }

  /** Feeds the messages of one receive, received at `t`; returns the commits they completed. */
  feed(msgs: readonly NftNotification[], t: number): Commit[] {
    const out: Commit[] = [];
    for (const m of msgs) {
      if (m.kind === "gen") {
        out.push({ t, genId: m.genId ?? 0, ...this.#open });
        this.#open = CommitCollector.#empty();
        continue;
      }
      const c = this.#open;
      if (m.kind === "element") {
        c.elements++;
        m.op === "new" ? c.added++ : c.removed++;
      } else c.objects++;
      const key = m.kind === "element" || m.kind === "set" ? m.name : `${m.kind}:${m.name}`;
      const n = c.names[key] ??= [0, 0];
      n[m.op === "new" ? 0 : 1]++;
    }
    return out;
  }
}

/** "set:+adds-deletes ..." of a commit, for a result line. */
export function describeCommit(c: Commit): string {
  return Object.entries(c.names).map(([k, [a, d]]) => `${k}:+${a}-${d}`).join(" ");
}

/** One API write, as the phase made it. */
export interface Write {
  /** When it was handed to the API server (ms, as {@link Commit.t}). */
  t: number;
  /** Whether the dataplane must change for it. */
  expectsChange: boolean;
  /** What the kernel should hold after it (see {@link Commit.state}); unset: anything. */
  state?: number;
}

/** What the kernel did for one write. */
export interface WriteOutcome {
  /** From the write to the first commit after it that carried elements (change writes only). */
  toKernelMs?: number;
  /** Element messages of the commits attributed to this write. */
  elements: number;
  /** Commits attributed to this write. */
  commits: number;
  /** Its commit answered several writes at once. */
  shared: boolean;
  /** Its commit came after a later write. */
  late: boolean;
}

/** Every write's outcome and the commits that answered no change write. */
export interface Attribution {
  outcomes: WriteOutcome[];
  /** Commits that answered several change writes at once. */
  sharedCommits: number;
  /** Commits that answered a change write after a later write was made (shared ones too). */
  lateCommits: number;
  /**
   * Commits with elements that answered nothing: while no change write waited, after a change
   * write already answered; or while some waited, in a state none of them leads to.
   */
  extraCommits: number;
  /** Commits while no change write waited, after a write that needed no change. */
  noChangeCommits: number;
  /** Their element messages. */
  noChangeElements: number;
  /**
   * Up to three of them, described, each with its time (s since the first write) and the commit
   * before it (for diagnosis).
   */
  noChangeExamples: string[];
  /** Change writes no commit answered before the end. */
  unanswered: number;
}

/** Commit `c` (with elements) answers the pending writes it reaches the state of, if any. */
function answer(
  a: Attribution,
  writes: readonly Write[],
  pending: number[],
  c: Commit,
  latest: number,
) {
  const reaches = (w: number) =>
    c.state === undefined || writes[w].state === undefined || writes[w].state === c.state;
  const last = pending.findLastIndex(reaches);
  if (last < 0) {
    a.extraCommits++;
    return;
  }
  const answered = pending.splice(0, last + 1);
  const shared = answered.length > 1;
  if (shared) a.sharedCommits++;
  if (answered[0] !== latest) a.lateCommits++;
  for (const w of answered) {
    a.outcomes[w].toKernelMs = c.t - writes[w].t;
    Object.assign(a.outcomes[w], { shared, late: w !== latest });
  }
}

/**
 * Matches commits (sorted by time) to writes (sorted by time); commits at or after `end`, or
 * before the first write, are left out.
 *
 * A change write is answered by the first commit after it that carries elements (a commit with
 * none, such as a class chain's own libnftables transaction, counts towards it but is not yet the
 * change). The agent writes the latest state it has seen, so a commit answers the waiting change
 * writes up to the last one whose {@link Write.state} it reaches (earlier ones are in effect or
 * moot); without states, all of them. Several answered at once (a batch): shared; answered after
 * a later write was made: late (both flagged, not hidden). A commit while no change write waits
 * belongs to the latest write before it: an extra commit if that write needed a change, else a
 * commit for a no-change write (a finding).
 */
export function attribute(
  writes: readonly Write[],
  commits: readonly Commit[],
  end: number,
): Attribution {
  const outcomes: WriteOutcome[] = writes.map(() => ({
    elements: 0,
    commits: 0,
    shared: false,
    late: false,
  }));
  const a: Attribution = {
    outcomes,
    sharedCommits: 0,
    lateCommits: 0,
    extraCommits: 0,
    noChangeCommits: 0,
    noChangeElements: 0,
    noChangeExamples: [],
    unanswered: 0,
  };
  const pending: number[] = [];
  let next = 0; // the first write not yet before the current commit
  for (const [k, c] of commits.entries()) {
    if (c.t >= end) break;
    for (; next < writes.length && writes[next].t <= c.t; next++) {
      if (writes[next].expectsChange) pending.push(next);
    }
    const latest = next - 1;
    if (latest < 0) continue;
    if (pending.length > 0) {
      const first = outcomes[pending[0]];
      first.commits++;
      first.elements += c.elements;
      if (c.elements > 0) answer(a, writes, pending, c, latest);
      continue;
    }
    outcomes[latest].commits++;
    outcomes[latest].elements += c.elements;
    if (writes[latest].expectsChange) a.extraCommits++;
    else {
      a.noChangeCommits++;
      a.noChangeElements += c.elements;
      if (a.noChangeExamples.length < 3) {
        const before = k > 0 ? describeCommit(commits[k - 1]) : "none";
        const at = ((c.t - writes[0].t) / 1000).toFixed(3);
        a.noChangeExamples.push(`${at} s: ${describeCommit(c)} (the commit before: ${before})`);
      }
    }
  }
  for (; next < writes.length; next++) if (writes[next].expectsChange) pending.push(next);
  a.unanswered = pending.length;
  return a;
}
