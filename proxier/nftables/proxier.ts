/**
 * The per-family nftables proxier: owns an {@link NftablesClient} and the
 * written state, and `sync()` reads as one idea — desired rules, diffed
 * against what was written, in one transaction (a cold start or a
 * regeneration in several, each carrying whole services) — followed by the
 * one commit of the written state once the kernel accepted it.
 *
 * Full sync: at start (restart adoption included), after a failure, when the
 * node or build context changed, and when asked (the engine owns the clock of
 * the periodic check against the kernel). A targeted check after another
 * program touched our table ({@link Proxier.noteForeign}) plans like a full
 * sync but reads only the touched objects (plan/touched_view.ts). Otherwise
 * partial: only the changed service ports are rebuilt and diffed.
 *
 * @module
 */
import { type NftablesClient, NftablesError, type Transaction } from "../../ffi/nftables/types.ts";
import { mallocTrim, trimsDone } from "../../ffi/malloc_trim.ts";
import {
  emptyStaleReport,
  mergeStaleReport,
  type ProxierConfig,
  type ProxyState,
  type StaleReport,
} from "../model.ts";
import { type BuildContext, buildContext, contextInputs, contextKey } from "./context.ts";
import type { Plan } from "./plan/common.ts";
import { planFull } from "./plan/full.ts";
import { readKernelView } from "./plan/kernel_view.ts";
import { readTouchedView } from "./plan/touched_view.ts";
import { elementsOnly, planElementRepair } from "./plan/element_repair.ts";
import {
  isEmptyTouched,
  mergeTouched,
  type Touched,
  touchedBuckets,
  withBuckets,
} from "./foreign.ts";
import { planPartial } from "./plan/partial.ts";
import { type Drift, kernelDrift } from "./drift.ts";
import type { LogFn } from "../../net/log.ts";
import { buildServiceRules, portRules, type ServiceRules } from "./service_rules.ts";
import { classDispatchChains } from "./skeleton.ts";
import { rehearse } from "./rehearsal.ts";
import {
  nextStaleDeadline,
  planStaleDeletion,
  staleRetryDelta,
  staleSteps,
  type StaleTry,
} from "./stale.ts";
import { type Delta, WrittenState } from "./written_state.ts";

export type { ProxierInput, ProxierOptions, SyncResult } from "./sync_types.ts";
import type { ProxierInput, ProxierOptions, SyncResult } from "./sync_types.ts";

/** A stale object that could not be deleted is tried again this much later. */
const STALE_RETRY_MS = 60_000;

/** Plans at least this big, and full syncs, are followed by {@link mallocTrim}. */
const TRIM_AFTER_OPS = 20_000;

/** One family's proxier. */
export class Proxier {
  /** What this proxier last committed, as the planners diff against it. */
  readonly written: WrittenState = new WrittenState();
  private readonly client: NftablesClient;
  private readonly cfg: ProxierConfig;
  private readonly staleDelay: number;
  private readonly maxOps: number;
  private readonly trim: ((then?: () => void) => void) | undefined;
  private readonly shouldYield: (() => boolean) | undefined;
  private readonly yieldEveryMs: number;
  private readonly verifySetLimit: number;
  private readonly now: () => number;
  private readonly log: LogFn;
  private readonly hostAddresses: (() => readonly string[] | undefined) | undefined;
  private preempted = 0;
  /** Changes taken by a sync that stepped aside, for the next one. */
  private carried: { changed: Set<string>; deleted: Set<string> } | undefined;
  private warnedKey: string | undefined;
  /** The last build context, with what it was built from (contextInputs). */
  private lastContext: { inputs: string; ctx: BuildContext; key: string } | undefined;
  private needFull = true;
  private fullReason = "startup";
  /** The next full sync moves to a fresh generation (the written state may be wrong). */
  private regenerate = false;
  /** Our objects other programs touched since the last check. */
  private touched: Touched | undefined;
  /** Bucket maps other programs changed: reported as drift by the regenerating sync. */
  private foreignBuckets: string[] = [];
  private pendingStale: StaleReport = emptyStaleReport();
  private programmedState: ProxyState | undefined;
  private busy = false;
  /** {@link trimsDone} when the partial path was last rehearsed (rehearsal.ts). */
  private rehearsedAtTrim: number | undefined;

  /** A proxier for one family; its first sync is full. */
  constructor(opts: ProxierOptions) {
    this.client = opts.client;
    this.cfg = opts.config;
    this.staleDelay = opts.staleChainDelayMs ?? 1000;
    this.maxOps = opts.maxOpsPerTransaction ?? 25_000;
    this.trim = opts.trimMemory === false ? undefined : opts.trimMemory ?? mallocTrim;
    this.verifySetLimit = opts.verifySetLimit ?? 4096;
    this.shouldYield = opts.shouldYield;
    this.yieldEveryMs = opts.yieldEveryMs ?? 50;
    this.now = opts.now ?? (() => performance.now());
    this.hostAddresses = opts.hostAddresses;
    this.log = opts.log ?? ((level, msg, fields) => {
      if (level !== "info") console.error(`${level}: ${msg}`, fields ?? "");
    });
  }

  /** Forces the next sync to be full. */
  requestFullSync(reason: string): void {
    if (!this.needFull) this.fullReason = reason;
    this.needFull = true;
  }

  /** Why the next full sync runs (for logs). */
  get nextFullReason(): string {
    return this.needFull ? this.fullReason : "periodic";
  }

  /** True when the next sync will be full. */
  get nextSyncFull(): boolean {
    return this.needFull;
  }

  /**
   * Another program touched these objects of our table: the next sync checks
   * and repairs them. A change to an endpoint bucket map (never listed: too
   * big) moves every frontend to a fresh generation instead.
   */
  noteForeign(t: Touched): void {
    if (isEmptyTouched(t)) return;
    const buckets = touchedBuckets(t, this.written.gen ?? 0);
    if (buckets.length > 0 && !this.written.empty) {
      this.foreignBuckets.push(...buckets);
      this.requestFullSync("another program changed an endpoint bucket map");
      this.regenerate = true;
    }
    this.touched = this.touched === undefined ? t : mergeTouched(this.touched, t);
  }

  /** True when a targeted check is waiting. */
  get checkPending(): boolean {
    return this.touched !== undefined;
  }

  /**
   * The state whose rules are committed (for the conntrack reconciler), or
   * undefined before the first successful sync. Its maps may be the
   * trackers' live maps: read, never mutate.
   */
  get programmed(): ProxyState | undefined {
    return this.programmedState;
  }

  /**
   * Syncs the rules to `input`. The caller (the engine) calls it only once
   * Services and EndpointSlices have synced. Throws when a transaction fails;
   * the next sync is then full, and moves to a fresh generation of endpoint maps.
   */
  async sync(given: ProxierInput): Promise<SyncResult> {
    mergeStaleReport(this.pendingStale, given.stale);
    // Changes a preempted sync took but did not write are written now.
    const input = this.withCarried(given);
    if (this.busy) throw new Error("Proxier.sync called while a sync is running");
    this.busy = true;
    const t0 = performance.now();
    try {
      const { ctx, key } = this.contextFor(input);
      let ops = 0;
      let txs = 0;
      const deleted = await this.deleteStale(ctx);
      ops += deleted.ops;
      txs += deleted.ops > 0 ? 1 : 0;
      const full = this.nextSyncFull || this.written.empty;
      const changed = input.changed.size + input.deleted.size > 0;
      if (full && this.preempted === 1 && !this.written.empty && changed) {
        // A full sync stepped aside for these changes: commit just them now, and run the (no
        // longer preemptible) full sync right after, even if more changes keep coming.
        this.preempted++;
        const pre = await this.runPlan(this.partialPlan(input, ctx));
        return { ...this.finish(input, false, t0, ops + pre.ops, txs + pre.txs), followUpMs: 0 };
      }
      let plan: Plan;
      let drift: Drift | undefined;
      // A full sync compares everything: the touched objects are among them.
      const touched = this.written.empty ? undefined : this.touched;
      this.touched = undefined;
      if (!full && touched !== undefined && elementsOnly(touched)) {
        // Only dispatch-map elements were touched: restore them without planning every service.
        const fix = await planElementRepair(this.client, this.written, touched);
        if (fix.tx.size > 0) await this.client.run(fix.tx);
        const ran = await this.runPlan(this.partialPlan(input, ctx));
        ops += fix.tx.size + ran.ops;
        txs += ran.txs + (fix.tx.size > 0 ? 1 : 0);
        return { ...this.finish(input, false, t0, ops, txs, deleted.chains), drift: fix.drift };
      }
      if (full || touched !== undefined) {
        const checked = await this.checkPlan(input, ctx, key, full, touched);
        if (checked === undefined) return this.preempt(input, t0, ops, txs, touched);
        ({ plan, drift } = checked);
      } else {
        plan = this.partialPlan(input, ctx);
      }
      const ran = await this.runPlan(plan);
      // A full sync's listing and rebuild leave the heap grown even when it writes nothing.
      // On a later turn: the plan just run is garbage by then, and the collection frees it.
      const trim = this.trim;
      // The rehearsal follows the trim (which may wait for a change): what the trim hands back is
      // faulted in again by it, not by the next change.
      if ((full || ran.ops >= TRIM_AFTER_OPS) && trim) {
        setTimeout(() => trim(() => this.warmUp()), 0);
      } else if (full) setTimeout(() => this.warmUp(), 0);
      if (full) {
        this.needFull = false;
        this.regenerate = false;
      }
      const checked = full || touched !== undefined;
      if (checked) this.preempted = 0;
      const res = this.finish(input, checked, t0, ops + ran.ops, txs + ran.txs, deleted.chains);
      return drift === undefined ? res : { ...res, drift };
    } catch (err) {
      this.requestFullSync("sync failed");
      this.foreignBuckets = [];
      throw err;
    } finally {
      this.busy = false;
    }
  }

  /** This sync's build context; warns once per context and asks for a full sync when it moved. */
  private contextFor(input: ProxierInput): { ctx: BuildContext; key: string } {
    const host = this.hostAddresses?.();
    const inputs = contextInputs(input.state, host);
    if (this.lastContext?.inputs !== inputs) {
      const built = buildContext(input.state, this.cfg, host);
      this.lastContext = { inputs, ctx: built, key: contextKey(built) };
    }
    const { ctx, key } = this.lastContext;
    if (key !== this.warnedKey) {
      // Settings the node cannot honour (e.g. localhost NodePorts): say so once per context.
      this.warnedKey = key;
      for (const w of ctx.warnings) this.log("warn", w, { family: this.client.family });
    }
    if (input.contextChanged) this.requestFullSync("node or ServiceCIDRs changed");
    if (this.written.contextKey !== undefined && key !== this.written.contextKey) {
      this.requestFullSync("build context changed");
    }
    return { ctx, key };
  }

  /**
   * The plan of a sync that compares with the kernel: everything (full) or what other programs
   * touched; undefined when a waiting change preempted it.
   */
  private async checkPlan(
    input: ProxierInput,
    ctx: BuildContext,
    key: string,
    full: boolean,
    touched: Touched | undefined,
  ): Promise<{ plan: Plan; drift: Drift | undefined } | undefined> {
    const canYield = this.shouldYield !== undefined && this.preempted === 0 &&
      !this.written.empty;
    const services = await this.buildAll(input, ctx, canYield);
    if (services === undefined) return undefined;
    const listHairpin = this.written.hairpin.size <= this.verifySetLimit;
    const view = full
      ? await readKernelView(this.client, listHairpin)
      : await readTouchedView(this.client, this.written, touched!, listHairpin);
    if (canYield && this.shouldYield!()) return undefined;
    let drift: Drift | undefined;
    // Kernel against what was written; meaningless when the written state is not trusted.
    if (!this.written.empty && !this.regenerate) drift = kernelDrift(this.written, view);
    drift = withBuckets(drift, this.foreignBuckets);
    this.foreignBuckets = [];
    const plan = planFull(this.written, {
      ctx,
      contextKey: key,
      services,
      view,
      regenerate: this.regenerate,
      now: this.now(),
      maxOps: this.maxOps,
    });
    return { plan, drift };
  }

  /** Builds every service port's rules; undefined when a waiting change preempted the build. */
  private async buildAll(
    input: ProxierInput,
    ctx: BuildContext,
    canYield: boolean,
  ): Promise<Map<string, ServiceRules> | undefined> {
    const out = new Map<string, ServiceRules>();
    const eps = input.state.endpoints;
    let slice = performance.now();
    for (const [id, svc] of input.state.services) {
      out.set(id, buildServiceRules(svc, eps.get(id) ?? [], ctx));
      if (canYield && performance.now() - slice >= this.yieldEveryMs) {
        // Let informer events in; a waiting change preempts this full sync.
        await new Promise((r) => setTimeout(r, 0));
        if (this.shouldYield!()) return undefined;
        slice = performance.now();
      }
    }
    return out;
  }

  /**
   * Rehearses the partial path (rehearsal.ts: pretend changes planned and encoded, nothing
   * sent) unless that was done since the last memory trim. The first change after a cold start,
   * or after a trim, otherwise compiles that path and faults its pages back in: ~300 page
   * faults at 10k Services, against ~40 for the next changes (docs/benchmarks.md, eleventh
   * round). Each trim's follow-up calls it: the proxier's own, and the engine's after its first
   * conntrack reconcile.
   */
  warmUp(): void {
    if (this.client.rehearse === undefined || this.rehearsedAtTrim === trimsDone()) return;
    const state = this.programmedState, ctx = this.lastContext?.ctx;
    if (state === undefined || ctx === undefined || this.written.empty) return;
    // A sync waiting on the kernel comes first: try again once it is done.
    if (this.busy) return void setTimeout(() => this.warmUp(), 50);
    this.rehearsedAtTrim = trimsDone();
    const t0 = performance.now();
    try {
      const r = rehearse(this.written, state, ctx, this.client, this.now());
      const ms = (performance.now() - t0).toFixed(1);
      this.log("info", "Rehearsed the partial path", { ...r, elapsed: ms });
    } catch (err) {
      // What a real change would have met too: say so, and carry on.
      this.log("warn", "Rehearsing the partial path failed", { err: String(err) });
    }
  }

  /** The partial plan for the changed and deleted service ports. */
  private partialPlan(input: ProxierInput, ctx: BuildContext): Plan {
    const rulesOf = (id: string) => portRules(input.state, id, ctx);
    const changes = new Map<string, ServiceRules | null>();
    for (const id of [...input.changed, ...input.deleted]) changes.set(id, rulesOf(id) ?? null);
    return planPartial(this.written, { ctx, changes, rulesOf, now: this.now() });
  }

  /** Bookkeeping after a committed sync; builds its result. */
  private finish(
    input: ProxierInput,
    full: boolean,
    t0: number,
    ops: number,
    txs: number,
    deletedChains = 0,
  ): SyncResult {
    this.programmedState = input.state;
    const stale = this.pendingStale;
    this.pendingStale = emptyStaleReport();
    const deadline = nextStaleDeadline(this.written, this.staleDelay);
    return {
      full,
      ops,
      txs,
      seconds: (performance.now() - t0) / 1000,
      stale,
      deletedChains,
      followUpMs: deadline === undefined ? undefined : Math.max(0, deadline - this.now()),
    };
  }

  /**
   * Runs a plan's transactions in order, building the next one while the
   * kernel applies the current one, then commits the plan's delta: the one
   * place the written state changes. A failure leaves the state as it was
   * and asks for a full sync into a fresh generation, since some of the
   * plan's transactions may have been applied.
   */
  private async runPlan(plan: Plan): Promise<{ ops: number; txs: number }> {
    let ops = 0, txs = 0;
    let next: IteratorResult<Transaction, Delta>;
    try {
      for (next = plan.next(); !next.done;) {
        const tx = next.value;
        const applied = this.client.run(tx);
        applied.catch(() => {}); // awaited below, after the next one is built
        next = plan.next();
        await applied;
        ops += tx.size;
        txs++;
      }
    } catch (err) {
      this.requestFullSync("transaction failed");
      this.regenerate = true;
      throw err;
    }
    // The generator's return value: the delta, complete now that every transaction was built.
    this.written.commit(next.value);
    return { ops, txs };
  }

  /** Result of a full sync that stepped aside (stale report kept for the next one). */
  private preempt(
    input: ProxierInput,
    t0: number,
    ops: number,
    txs: number,
    touched?: Touched,
  ): SyncResult {
    this.preempted++;
    // The check that stepped aside is still due.
    if (touched !== undefined) {
      this.touched = this.touched === undefined ? touched : mergeTouched(this.touched, touched);
    }
    // The tracker has handed these changes over: keep them for the next sync.
    this.carried = { changed: new Set(input.changed), deleted: new Set(input.deleted) };
    return {
      full: false,
      preempted: true,
      ops,
      txs,
      seconds: (performance.now() - t0) / 1000,
      stale: emptyStaleReport(),
      deletedChains: 0,
    };
  }

  /** `input` plus the changes a preempted sync carried over (a later change of an id wins). */
  private withCarried(input: ProxierInput): ProxierInput {
    const c = this.carried;
    if (c === undefined) return input;
    this.carried = undefined;
    const changed = new Set(input.changed);
    const deleted = new Set(input.deleted);
    for (const id of c.changed) if (!deleted.has(id)) changed.add(id);
    for (const id of c.deleted) if (!changed.has(id)) deleted.add(id);
    return { ...input, changed, deleted };
  }

  /** Deletes stale chains and sets in their own transaction; a failure is only logged. */
  private async deleteStale(ctx: BuildContext): Promise<{ ops: number; chains: number }> {
    const dispatch = (left: readonly string[]) => classDispatchChains(ctx, left);
    const p = planStaleDeletion(this.written, this.now(), this.staleDelay, dispatch);
    if (p === null) return { ops: 0, chains: 0 };
    try {
      await this.client.run(p.tx);
      this.written.commit(p.delta);
      return { ops: p.tx.size, chains: p.chains.length };
    } catch (err) {
      // One at a time (stale.ts plans the retries).
      const tried: StaleTry[] = [];
      for (const step of staleSteps(p)) {
        let inUse = false;
        try {
          await this.client.run(step.tx);
        } catch (e) {
          inUse = !(e instanceof NftablesError && e.notFound);
        }
        tried.push({ ...step, inUse });
      }
      this.written.commit(staleRetryDelta(tried, this.now() + STALE_RETRY_MS, p.rewrites));
      const kept = tried.filter((t) => t.inUse).length;
      if (kept > 0) {
        this.log("warn", "Unable to delete stale chains or sets; will retry later", {
          objects: kept,
          err: String(err),
        });
      }
      return { ops: 0, chains: 0 };
    }
  }
}
