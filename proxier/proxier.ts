/**
 * The per-family proxier: owns an {@link NftablesClient}, the written state,
 * and `sync()`, which picks a full or partial sync, runs the transactions and
 * reports what conntrack cleanup and metrics need.
 *
 * Full sync: at start (including restart adoption of an existing table),
 * after any failure, when the node or build context changed, every
 * `fullSyncPeriodMs`, and when asked. Otherwise partial: only the changed
 * service ports are rebuilt and diffed.
 *
 * @module
 */
import type { Element, NftablesClient } from "../ffi/nftables/types.ts";
import type { Fragment } from "./fragment.ts";
import type {
  EndpointInfo,
  ProxierConfig,
  ProxyState,
  ServicePortInfo,
  StaleReport,
} from "./model.ts";
import * as rules from "./rules.ts";
import {
  commitPlan,
  commitStaleDeletion,
  type KernelView,
  nextStaleDeadline,
  planFull,
  planPartial,
  planStaleDeletion,
  type SyncPlan,
} from "./sync_plan.ts";
import { BASE_ID, sameFragment, WrittenState } from "./written_state.ts";
import { mallocTrim } from "../ffi/malloc_trim.ts";

/** The rule builder the proxier uses (proxier/rules.ts by default; swappable for tests/benchmarks). */
export interface RuleBuilder<Ctx = unknown> {
  buildContext(state: ProxyState, cfg: ProxierConfig): Ctx;
  contextKey(ctx: Ctx): string;
  buildBase(ctx: Ctx): Fragment;
  buildServicePort(svc: ServicePortInfo, eps: readonly EndpointInfo[], ctx: Ctx): Fragment;
}

/** The default builder: proxier/rules.ts. */
export const defaultBuilder: RuleBuilder = rules as unknown as RuleBuilder;

/** Log sink (matches the trackers' LogFn shape). */
export type ProxierLog = (
  level: "info" | "warn" | "error",
  msg: string,
  fields?: Record<string, unknown>,
) => void;

/** Settings of a {@link Proxier}. */
export interface ProxierOptions {
  client: NftablesClient;
  config: ProxierConfig;
  builder?: RuleBuilder;
  /** Periodic full resync (default 1 h). */
  fullSyncPeriodMs?: number;
  /** Delay between flushing a stale chain and deleting it (default 1000 ms; see sync_plan.ts). */
  staleChainDelayMs?: number;
  /**
   * Cold start chunk size in chains (0 = one transaction). Default 2000:
   * libnftables' peak memory grows with the script, so chunks cut peak RSS by
   * a third at the same or better speed (docs/benchmarks.md).
   */
  chunkChains?: number;
  /**
   * Cold start with chunks: build and send chunk by chunk, so building can
   * overlap the kernel. Default false: on the shared 2-vCPU test machine it
   * measured no better (docs/benchmarks.md), and planning first is simpler.
   */
  streamColdStart?: boolean;
  /**
   * Returns freed native memory to the OS after large transactions
   * (libnftables allocates hundreds of MB for a big script and glibc keeps it).
   * Default: libc `malloc_trim(0)` when FFI is allowed; `false` disables.
   */
  trimMemory?: (() => void) | false;
  /** Full-sync verification lists a non-map set only up to this many expected elements (default 4096). */
  verifySetLimit?: number;
  /**
   * Polled during a full sync (after yielding to the event loop): return true
   * when a change is waiting. The full sync then steps aside once (result
   * `preempted`), and the next sync commits the waiting changes before
   * redoing the full sync, so a long full sync does not hold back an
   * endpoint change.
   */
  shouldYield?: () => boolean;
  /** Monotonic clock in ms (default performance.now). */
  now?: () => number;
  log?: ProxierLog;
}

/** What one family's changes look like (ClusterState's FamilySync plus the node flag). */
export interface ProxierInput {
  state: ProxyState;
  /** Service port ids whose info or endpoints changed. */
  changed: ReadonlySet<string>;
  /** Service port ids that are gone. */
  deleted: ReadonlySet<string>;
  stale: StaleReport;
  /** Node labels/IPs/podCIDRs or ServiceCIDRs changed: forces a full sync. */
  nodeChanged?: boolean;
}

/** Result of a committed sync. */
export interface SyncResult {
  full: boolean;
  /** Operations applied (all transactions, stale-chain deletion included). */
  ops: number;
  /** Transactions run. */
  txs: number;
  seconds: number;
  /** Conntrack work now due (accumulated across failed syncs). */
  stale: StaleReport;
  /** Stale chains deleted by this sync. */
  deletedChains: number;
  /** When set, run another sync after this many ms (pending stale-chain deletion). */
  followUpMs?: number;
  /**
   * True when a full sync stepped aside because `shouldYield` said a change
   * was waiting: nothing else was done; run the next sync at once.
   */
  preempted?: boolean;
}

/** A preemptible full sync yields to the event loop this often (ms of work). */
const YIELD_EVERY_MS = 50;

/** Transactions at least this big are followed by a malloc_trim. */
const TRIM_AFTER_OPS = 20_000;

function emptyStale(): StaleReport {
  return { servicesWithNewEndpoints: [], deletedEndpoints: [] };
}

/** One family's proxier. */
export class Proxier {
  readonly written: WrittenState = new WrittenState();
  private readonly client: NftablesClient;
  private readonly cfg: ProxierConfig;
  private readonly builder: RuleBuilder;
  private readonly fullPeriod: number;
  private readonly staleDelay: number;
  private readonly chunkChains: number;
  private readonly trim: (() => void) | undefined;
  private readonly shouldYield: (() => boolean) | undefined;
  private readonly stream: boolean;
  private preempted = 0;
  private warnedKey: string | undefined;
  private readonly verifySetLimit: number;
  private readonly now: () => number;
  private readonly log: ProxierLog;
  private needFull = true;
  private fullReason = "startup";
  private lastFull = -Infinity;
  private pendingStale: StaleReport = emptyStale();
  private programmedState: ProxyState | undefined;
  private syncedServices = false;
  private syncedSlices = false;
  private readyWaiters: (() => void)[] = [];
  private busy = false;

  constructor(opts: ProxierOptions) {
    this.client = opts.client;
    this.cfg = opts.config;
    this.builder = opts.builder ?? defaultBuilder;
    this.fullPeriod = opts.fullSyncPeriodMs ?? 3_600_000;
    this.staleDelay = opts.staleChainDelayMs ?? 1000;
    this.chunkChains = opts.chunkChains ?? 2000;
    this.trim = opts.trimMemory === false ? undefined : opts.trimMemory ?? mallocTrim;
    this.verifySetLimit = opts.verifySetLimit ?? 4096;
    this.shouldYield = opts.shouldYield;
    this.stream = opts.streamColdStart ?? false;
    this.now = opts.now ?? (() => performance.now());
    this.log = opts.log ?? ((level, msg, fields) => {
      if (level !== "info") console.error(`${level}: ${msg}`, fields ?? "");
    });
  }

  /** Tells the proxier an informer has synced; nothing is programmed before both have. */
  markSynced(what: "services" | "endpointSlices"): void {
    if (what === "services") this.syncedServices = true;
    else this.syncedSlices = true;
    if (this.ready) { for (const w of this.readyWaiters.splice(0)) w(); }
  }

  /** True once Services and EndpointSlices have both synced. */
  get ready(): boolean {
    return this.syncedServices && this.syncedSlices;
  }

  /** Resolves once {@link ready}. */
  waitReady(): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((res) => this.readyWaiters.push(res));
  }

  /** Forces the next sync to be full. */
  requestFullSync(reason: string): void {
    if (!this.needFull) this.fullReason = reason;
    this.needFull = true;
  }

  /** True when the next sync will be full. */
  get nextSyncFull(): boolean {
    return this.needFull || this.now() - this.lastFull >= this.fullPeriod;
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
   * Syncs the rules to `input`. Returns null (and keeps the stale report for
   * later) when not ready yet. Throws when a transaction fails; the next sync
   * is then full.
   */
  async sync(input: ProxierInput): Promise<SyncResult | null> {
    this.mergeStale(input.stale);
    if (!this.ready) return null;
    if (this.busy) throw new Error("Proxier.sync called while a sync is running");
    this.busy = true;
    const t0 = performance.now();
    try {
      const ctx = this.builder.buildContext(input.state, this.cfg);
      const key = this.builder.contextKey(ctx);
      if (key !== this.warnedKey) {
        // Settings the node cannot honour (e.g. localhost NodePorts): say so once per context.
        this.warnedKey = key;
        for (const w of (ctx as { warnings?: string[] }).warnings ?? []) {
          this.log("warn", w, { family: this.client.family });
        }
      }
      if (input.nodeChanged) this.requestFullSync("node or ServiceCIDRs changed");
      if (this.written.contextKey !== undefined && key !== this.written.contextKey) {
        this.requestFullSync("build context changed");
      }
      const full = this.nextSyncFull;
      let ops = 0;
      let txs = 0;
      const deleted = await this.deleteStaleChains();
      if (deleted.ops > 0) {
        ops += deleted.ops;
        txs++;
      }
      if (
        full && this.preempted > 0 && !this.written.empty &&
        input.changed.size + input.deleted.size > 0
      ) {
        // A full sync stepped aside for these changes: commit just them now,
        // and ask for the (no longer preemptible) full sync right after.
        const pre = planPartial(this.written, this.buildChanges(input, ctx));
        await this.runPlan(pre);
        this.programmedState = input.state;
        const stale = this.pendingStale;
        this.pendingStale = emptyStale();
        return {
          full: false,
          ops: ops + pre.ops,
          txs: txs + pre.txs.length,
          seconds: (performance.now() - t0) / 1000,
          stale,
          deletedChains: deleted.chains,
          followUpMs: 0,
        };
      }
      if (full && this.chunkChains > 0 && this.stream && this.written.empty) {
        const chains = await this.client.listChains();
        if (chains.length === 0) {
          const r = await this.coldStart(input, ctx, key);
          ops += r.ops;
          txs += r.txs;
          return this.finish(input, true, t0, ops, txs, deleted.chains);
        }
      }
      let plan: SyncPlan;
      if (full) {
        // Steps aside at most once per full sync, and never on a cold start.
        const canYield = this.shouldYield !== undefined && this.preempted === 0 &&
          !this.written.empty;
        const fragments = new Map<string, Fragment>();
        fragments.set(BASE_ID, this.builder.buildBase(ctx));
        const eps = input.state.endpoints;
        let slice = performance.now();
        for (const [id, svc] of input.state.services) {
          const built = this.builder.buildServicePort(svc, eps.get(id) ?? [], ctx);
          // Keep the written object when equal: the rebuilt copy dies young.
          const old = this.written.fragments.get(id);
          fragments.set(id, old !== undefined && sameFragment(old, built) ? old : built);
          if (canYield && performance.now() - slice > YIELD_EVERY_MS) {
            // Let informer events in; a waiting change preempts this full sync.
            await new Promise((r) => setTimeout(r, 0));
            if (this.shouldYield!()) return this.preempt(t0, ops, txs, deleted.chains);
            slice = performance.now();
          }
        }
        const view = await this.kernelView(fragments.get(BASE_ID)!);
        if (canYield && this.shouldYield!()) return this.preempt(t0, ops, txs, deleted.chains);
        plan = planFull(this.written, fragments, key, view, { chunkChains: this.chunkChains });
      } else {
        plan = planPartial(this.written, this.buildChanges(input, ctx));
      }
      await this.runPlan(plan);
      ops += plan.ops;
      txs += plan.txs.length;
      return this.finish(input, full, t0, ops, txs, deleted.chains);
    } catch (err) {
      this.requestFullSync("sync failed");
      throw err;
    } finally {
      this.busy = false;
    }
  }

  /** Bookkeeping after a committed sync; builds its result. */
  private finish(
    input: ProxierInput,
    full: boolean,
    t0: number,
    ops: number,
    txs: number,
    deletedChains: number,
  ): SyncResult {
    if (full) {
      this.needFull = false;
      this.lastFull = this.now();
      this.preempted = 0;
    }
    this.programmedState = input.state;
    const stale = this.pendingStale;
    this.pendingStale = emptyStale();
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
   * Cold start (no table): builds, plans and sends chains in chunks as it
   * goes, so building chunk k+1 overlaps the kernel applying chunk k; then
   * ONE transaction adds every element, so no service is reachable
   * half-programmed. A failed chunk leaves only unreachable chains, which the
   * next (full) sync adopts.
   */
  private async coldStart(
    input: ProxierInput,
    ctx: unknown,
    key: string,
  ): Promise<{ ops: number; txs: number }> {
    const all = new Map<string, Fragment>();
    const pending: Promise<void>[] = [];
    const plans: SyncPlan[] = [];
    let group = new Map<string, Fragment | null>();
    let chains = 0;
    const send = async (withTable: boolean) => {
      const plan = planPartial(this.written, group, { structureOnly: true, withTable });
      plans.push(plan);
      for (const tx of plan.txs) {
        const p = this.client.run(tx);
        p.catch(() => {}); // observed below via allSettled
        pending.push(p);
      }
      group = new Map();
      chains = 0;
      // Let the client start this chunk before we build the next one.
      await new Promise((r) => setTimeout(r, 0));
    };
    const base = this.builder.buildBase(ctx);
    all.set(BASE_ID, base);
    group.set(BASE_ID, base);
    chains += base.chains.length;
    await send(true);
    const eps = input.state.endpoints;
    for (const [id, svc] of input.state.services) {
      const f = this.builder.buildServicePort(svc, eps.get(id) ?? [], ctx);
      all.set(id, f);
      group.set(id, f);
      chains += f.chains.length;
      if (chains >= this.chunkChains) await send(false);
    }
    if (group.size > 0) await send(false);
    const settled = await Promise.allSettled(pending);
    const failed = settled.find((r) => r.status === "rejected");
    if (failed !== undefined) {
      this.requestFullSync("cold start chunk failed");
      throw (failed as PromiseRejectedResult).reason;
    }
    const now = this.now();
    let ops = 0;
    for (const p of plans) {
      commitPlan(this.written, p, now);
      ops += p.ops;
    }
    const final = planFull(this.written, all, key);
    await this.runPlan(final);
    this.trim?.();
    return { ops: ops + final.ops, txs: pending.length + final.txs.length };
  }

  /** Rebuilds the fragments of the changed/deleted ids (null = gone). */
  private buildChanges(input: ProxierInput, ctx: unknown): Map<string, Fragment | null> {
    const changes = new Map<string, Fragment | null>();
    const eps = input.state.endpoints;
    for (const id of [...input.changed, ...input.deleted]) {
      const svc = input.state.services.get(id);
      changes.set(
        id,
        svc === undefined ? null : this.builder.buildServicePort(svc, eps.get(id) ?? [], ctx),
      );
    }
    return changes;
  }

  /** Runs a plan's transactions in order and commits it. */
  private async runPlan(plan: SyncPlan): Promise<void> {
    for (const tx of plan.txs) {
      try {
        await this.client.run(tx);
      } catch (err) {
        this.requestFullSync("transaction failed");
        throw err;
      }
    }
    commitPlan(this.written, plan, this.now());
    if (plan.ops >= TRIM_AFTER_OPS) this.trim?.();
  }

  /** Result of a full sync that stepped aside (stale report kept for the next one). */
  private preempt(t0: number, ops: number, txs: number, deletedChains: number): SyncResult {
    this.preempted++;
    return {
      full: false,
      preempted: true,
      ops,
      txs,
      seconds: (performance.now() - t0) / 1000,
      stale: emptyStale(),
      deletedChains,
    };
  }

  private mergeStale(r: StaleReport): void {
    if (r.servicesWithNewEndpoints.length > 0) {
      this.pendingStale.servicesWithNewEndpoints.push(...r.servicesWithNewEndpoints);
    }
    if (r.deletedEndpoints.length > 0) {
      this.pendingStale.deletedEndpoints.push(...r.deletedEndpoints);
    }
  }

  /** Deletes chains flushed long enough ago, in their own transaction. */
  private async deleteStaleChains(): Promise<{ ops: number; chains: number }> {
    const now = this.now();
    const p = planStaleDeletion(this.written, now, this.staleDelay);
    if (p === null) return { ops: 0, chains: 0 };
    try {
      await this.client.run(p.tx);
      commitStaleDeletion(this.written, p.chains);
      return { ops: p.tx.size, chains: p.chains.length };
    } catch (err) {
      // Not fatal: retry later; a full sync re-checks the chains against the kernel.
      for (const c of p.chains) this.written.staleChains.set(c, now);
      this.log("warn", "Unable to delete stale chains; will retry later", {
        chains: p.chains.length,
        err: String(err),
      });
      return { ops: 0, chains: 0 };
    }
  }

  /** Chain names and the skeleton's static set/map elements, read from the kernel. */
  private async kernelView(base: Fragment): Promise<KernelView> {
    const chains = await this.client.listChains();
    const view: KernelView = { tableExists: chains.length > 0, chains, elements: new Map() };
    if (!view.tableExists) return view;
    // Dispatch maps always; sets only while small (hairpin holds one element per
    // endpoint IP, and listing costs ~35 us per element): verification must stay cheap.
    const expected = new Map<string, number>();
    for (const rec of this.written.elements.values()) {
      expected.set(rec.spec.target, (expected.get(rec.spec.target) ?? 0) + 1);
    }
    for (const s of base.sets) {
      if (s.flags?.includes("dynamic")) continue;
      if (s.kind === "set" && (expected.get(s.name) ?? 0) > this.verifySetLimit) continue;
      try {
        const els: Element[] = await this.client.listElements(s.kind, s.name);
        view.elements.set(s.name, els);
      } catch (err) {
        // A missing map: forget what we think is in it so it is re-created and refilled.
        if (!(err instanceof Error && /does not exist|No such file/i.test(err.message))) throw err;
        this.written.sets.delete(s.name);
        for (const [id, rec] of [...this.written.elements]) {
          if (rec.spec.target === s.name) this.written.elements.delete(id);
        }
      }
    }
    return view;
  }
}
