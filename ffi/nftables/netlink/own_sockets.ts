/**
 * Which nftables notifications this process caused: a batch's notifications
 * carry the port id of the socket that sent it, and ours are the port ids of
 * our own NETLINK_NETFILTER sockets (../../netlink/own_portids.ts).
 *
 * An unknown port id costs, in order: a re-read of the sockets already found
 * (a few syscalls: libnftables binds its socket at its first command); then
 * a full descriptor scan, at most one per `rescanIntervalMs` (and per 50
 * times the last scan's duration), so a burst of foreign batches scans once; a port id a full scan did not find is
 * remembered as foreign and not scanned for again. As a last resort, a batch
 * whose NEWGEN names a thread of this process as the committer is ours
 * whatever the scans say (a socket opened and closed between two scans):
 * that is logged once, and its port id counts as ours from then on, so our
 * own writes never turn every sync into a check.
 *
 * @module
 */
import { readTextFileSync } from "../../libc_files.ts";
import { ownNetfilterSockets } from "../../netlink/own_portids.ts";
import type { LogFn } from "../../../net/log.ts";
import type { NftNotification } from "./notify.ts";

/** Where our sockets' port ids come from (an OwnNetlinkSockets, or a mock). */
export interface PortidSource {
  /** The known sockets' port ids, re-read (cheap). */
  portids(): Set<number>;
  /** Every socket's port id, from a full scan (costly). */
  rescan(): Set<number>;
  /** Calls `listener` with what each full scan finds, whoever asked for it; returns the unsubscribe. */
  subscribe?(listener: (portids: Set<number>) => void): () => void;
}

/** Settings of {@link OwnSockets}. */
export interface OwnSocketsOptions {
  /** Milliseconds clock (tests). */
  now?: () => number;
  /** Least time between two full scans on unknown port ids; default 1 s. */
  rescanIntervalMs?: number;
  /** Whether task `pid` (NEWGEN's committer) is a thread of this process; default: /proc. */
  isOurTask?: (pid: number) => boolean;
  /** Where the one warning goes. */
  log?: LogFn;
}

/** Port ids a full scan did not find, remembered at most this many. */
const FOREIGN_MAX = 4096;
/** The next full scan waits at least this many times as long as the last one took. */
const SCAN_SHARE = 50;

/**
 * Tells our notifications from foreign ones by port id, with the set of our
 * port ids kept fresh as cheaply as the case allows.
 */
export class OwnSockets {
  #ids: Set<number>;
  readonly #source: PortidSource | null;
  readonly #now: () => number;
  readonly #interval: number;
  readonly #isOurTask: (pid: number) => boolean;
  readonly #log: LogFn | undefined;
  /** Port ids found ours through NEWGEN only. */
  readonly #adopted = new Set<number>();
  /** Port ids a full scan did not find. */
  readonly #foreign = new Set<number>();
  #lastScan = -Infinity;
  /** Least time until the next full scan: the interval, or more after a slow scan. */
  #gap = 0;
  #warned = false;

  /** Scans for our sockets now (`source` null: no libc, nothing is ours). */
  constructor(
    source: PortidSource | null = ownNetfilterSockets(),
    opts: OwnSocketsOptions = {},
  ) {
    this.#source = source;
    this.#now = opts.now ?? (() => performance.now());
    this.#interval = opts.rescanIntervalMs ?? 1000;
    this.#isOurTask = opts.isOurTask ?? isOurTask;
    this.#log = opts.log;
    this.#ids = source?.rescan() ?? new Set();
  }

  /** Our sockets' port ids as last read. */
  get ids(): ReadonlySet<number> {
    return this.#ids;
  }

  /**
   * Takes in the port ids of every full scan of the source, whoever runs it (a client right
   * after opening a socket), calling `onChange` when they differ from ours: the monitor then
   * filters a new socket's notifications before its first batch. Returns the unsubscribe.
   */
  follow(onChange: () => void): () => void {
    return this.#source?.subscribe?.((found) => {
      const next = this.#with(found);
      if (sameIds(next, this.#ids)) return;
      this.#ids = next;
      onChange();
    }) ?? (() => {});
  }

  /** The notifications another program caused, and whether our set of port ids changed. */
  foreign(msgs: readonly NftNotification[]): { foreign: NftNotification[]; changed: boolean } {
    const unknown = (p: number) => p !== 0 && !this.#ids.has(p) && !this.#foreign.has(p);
    const before = this.#ids;
    if (this.#source && msgs.some((m) => unknown(m.portid))) {
      this.#ids = this.#with(this.#source.portids());
      if (msgs.some((m) => unknown(m.portid)) && this.#now() - this.#lastScan >= this.#gap) {
        const t0 = this.#now();
        this.#ids = this.#with(this.#source.rescan());
        this.#lastScan = this.#now();
        // A scan of a huge fd table (~0.4 s at 250k descriptors) runs on the event loop: at most
        // 2% of it goes to scans.
        this.#gap = Math.max(this.#interval, SCAN_SHARE * (this.#lastScan - t0));
        this.#rememberForeign(msgs.map((m) => m.portid).filter(unknown));
      }
    }
    this.#adoptOurTasks(msgs);
    const changed = !sameIds(before, this.#ids);
    return { foreign: msgs.filter((m) => !this.#ids.has(m.portid)), changed };
  }

  /** `found` plus the adopted port ids. */
  #with(found: Set<number>): Set<number> {
    for (const p of this.#adopted) found.add(p);
    return found;
  }

  #rememberForeign(ports: number[]): void {
    if (this.#foreign.size + ports.length > FOREIGN_MAX) this.#foreign.clear();
    for (const p of ports) this.#foreign.add(p);
  }

  /** Port ids whose NEWGEN names one of our threads become ours (logged once). */
  #adoptOurTasks(msgs: readonly NftNotification[]): void {
    for (const m of msgs) {
      if (m.kind !== "gen" || m.pid === undefined || m.portid === 0) continue;
      if (this.#ids.has(m.portid) || !this.#isOurTask(m.pid)) continue;
      this.#adopted.add(m.portid);
      this.#foreign.delete(m.portid);
      this.#ids = new Set([...this.#ids, m.portid]);
      if (this.#warned) continue;
      this.#warned = true;
      this.#log?.(
        "warn",
        "nftables notifications: a batch this process committed came from a netlink socket " +
          "none of its descriptors holds (opened and closed between two scans?); its port id " +
          "counts as ours from now on, so our own writes are not taken for another program's",
        { portid: m.portid, thread: m.pid, proc: m.proc },
      );
    }
  }
}

function sameIds(a: ReadonlySet<number>, b: ReadonlySet<number>): boolean {
  return a.size === b.size && [...a].every((p) => b.has(p));
}

/** Our pid namespace is the initial one (known once): only then are NEWGEN's pids ours to read. */
let initialPidNs: boolean | undefined;

/**
 * Whether task `pid` is a thread of this process. NEWGEN carries the
 * committing thread's id in the initial pid namespace, so this answers
 * false in any other (a container's): /proc/<pid> would name another task.
 * kthreadd is pid 2 only in the initial namespace.
 */
export function isOurTask(pid: number): boolean {
  try {
    initialPidNs ??= /^Name:\s+kthreadd$/m.test(readTextFileSync("/proc/2/status"));
    if (!initialPidNs) return false;
    const tgid = readTextFileSync(`/proc/${pid}/status`).match(/^Tgid:\s+(\d+)$/m);
    return tgid !== null && Number(tgid[1]) === Deno.pid;
  } catch {
    initialPidNs ??= false;
    return false;
  }
}
