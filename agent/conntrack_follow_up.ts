/**
 * The engine's conntrack work after each commit and on its period: stale UDP flows deleted once
 * the rules that replace them are in, the Worker's reconcile index fed (before each reconcile)
 * with the ports the commits changed, and the periodic reconcile over what each family programmed. All of it goes through
 * one {@link ConntrackRunner} (the Worker in production); none of it can fail a sync.
 *
 * @module
 */
import type { ConntrackRunner } from "../conntrack/runner.ts";
import type { ProxyState, StaleReport } from "../proxier/model.ts";
import { familyLabel, type IpFamily } from "../net/family.ts";
import type { Logger } from "./log.ts";
import type { ProxyMetrics } from "./metrics.ts";

/** What {@link ConntrackFollowUp} works with. */
export interface ConntrackFollowUpOptions {
  /** The runner; none: no conntrack work at all. */
  runner?: ConntrackRunner;
  /** Period of the reconcile in ms; 0 disables it (and its index). */
  reconcilePeriodMs: number;
  /** Where failures are logged. */
  log: Logger;
  /** The reconciler's duration and deletion series. */
  metrics?: ProxyMetrics;
  /** Whether the engine is stopping: errors then are the Worker closing, not failures. */
  stopped: () => boolean;
  /** Run once after the first reconcile (which starts the Worker and hands it the index). */
  afterFirstReconcile?: () => void;
}

function isEmpty(r: StaleReport): boolean {
  return r.servicesWithNewEndpoints.length === 0 && r.deletedEndpoints.length === 0 &&
    !r.deletedServices?.length;
}

/** Conntrack follow-up of the engine's commits. */
export class ConntrackFollowUp {
  readonly #o: ConntrackFollowUpOptions;
  #reconciling = false;
  #reconciled = false;
  /** Per family, the ports changed since the index was last fed, and the newest state. */
  readonly #unfed = new Map<IpFamily, { state: ProxyState; ids: Set<string> }>();

  /** Follow-up over `opts.runner`. */
  constructor(opts: ConntrackFollowUpOptions) {
    this.#o = opts;
  }

  /**
   * The reconcile index follows a commit of family `f`: the ports `changed` since the last.
   * Only a reconcile reads the index, so the ports are gathered here and handed to the runner
   * just before the next one ({@link reconcile}): one message per reconcile instead of one per
   * commit, which at 100 commits a second was a few percent of a core.
   */
  feedIndex(f: IpFamily, s: ProxyState, changed: ReadonlySet<string>): void {
    // No reconcile, no index (and no Worker thread started for it).
    if (!(this.#o.reconcilePeriodMs > 0) || !this.#o.runner?.updateIndex) return;
    const p = this.#unfed.get(f);
    if (p === undefined) this.#unfed.set(f, { state: s, ids: new Set(changed) });
    else {
      p.state = s;
      for (const id of changed) p.ids.add(id);
    }
  }

  /** Hands the gathered ports to the runner (before a reconcile). */
  #flushIndex(): void {
    for (const [f, p] of this.#unfed) {
      try {
        this.#o.runner?.updateIndex?.(f, p.state, p.ids);
      } catch (err) {
        // A malformed address (the trackers validate, so not expected): the runner's reconciles
        // build from the whole state until an update succeeds; rules are unaffected.
        this.#o.log.error("Cannot update the conntrack reconcile index", err, {
          ipFamily: familyLabel(f),
        });
      }
    }
    this.#unfed.clear();
  }

  /**
   * Deletes the flows `report` names, after the commit that replaced their rules. On the first
   * sync after a restart (`adoptedFirstSync`) every service looks newly active; flushing their
   * flows would cut healthy clients, so only removals count then (the reconciler finds the rest).
   */
  async cleanup(f: IpFamily, report: StaleReport, adoptedFirstSync: boolean): Promise<void> {
    const { runner, log } = this.#o;
    if (!runner) return;
    if (adoptedFirstSync) report = { ...report, servicesWithNewEndpoints: [] };
    if (isEmpty(report)) return;
    try {
      const res = await runner.cleanup(f, report);
      if (res.deleted > 0 || res.errors > 0) {
        log.v(2)?.info("Deleted stale UDP conntrack entries", {
          ipFamily: familyLabel(f),
          deleted: res.deleted,
          errors: res.errors,
        });
      }
    } catch (err) {
      if (this.#o.stopped()) return;
      log.error("Conntrack cleanup failed; the reconciler will retry", err, {
        ipFamily: familyLabel(f),
      });
    }
  }

  /** Runs the reconciler over each family's programmed state (skipping one not programmed yet). */
  async reconcile(programmed: readonly [IpFamily, ProxyState | undefined][]): Promise<void> {
    const { runner, log, metrics } = this.#o;
    if (!runner || !(this.#o.reconcilePeriodMs > 0) || this.#reconciling || this.#o.stopped()) {
      return;
    }
    this.#reconciling = true;
    try {
      this.#flushIndex();
      for (const [f, state] of programmed) {
        if (state === undefined) continue;
        try {
          const r = await runner.reconcile(f, state);
          const l = { ip_family: familyLabel(f) };
          metrics?.conntrackReconcilerSyncDuration.observe(l, r.seconds);
          metrics?.conntrackReconcilerDeletedEntriesTotal.inc(l, r.deleted);
          log.v(4)?.info("Conntrack reconcile done", {
            ipFamily: familyLabel(f),
            scanned: r.scanned,
            stale: r.stale,
            deleted: r.deleted,
            interrupted: r.interrupted,
            elapsed: `${(r.seconds * 1000).toFixed(1)}ms`,
          });
        } catch (err) {
          // At shutdown the worker closes under a running reconcile: not an error.
          if (!this.#o.stopped()) {
            log.error("Conntrack reconcile failed", err, { ipFamily: familyLabel(f) });
          }
        }
      }
    } finally {
      this.#reconciling = false;
    }
    if (!this.#reconciled) {
      this.#reconciled = true;
      this.#o.afterFirstReconcile?.();
    }
  }
}
