/**
 * The sync engine: the one loop between the informers and the kernel.
 *
 * Informer callbacks only record changes (`record*`) and request a sync. The
 * bounded-frequency runner then applies the pending changes, syncs each IP
 * family's proxier, and after a commit does the follow-up work: metrics,
 * health, stale UDP conntrack cleanup and the HealthCheckNodePort servers.
 * A periodic conntrack reconcile runs from the same loop; both conntrack jobs
 * go through one ConntrackRunner (a Worker thread in production).
 *
 * @module
 */
import type { ProxyState } from "../proxier/model.ts";
import type { ClusterState, FamilySync } from "../proxier/cluster_state.ts";
import type { EndpointSlice, ServiceCIDR, V1Node, V1Service } from "../proxier/k8s_types.ts";
import type { Proxier, SyncResult } from "../proxier/nftables/proxier.ts";
import { BoundedFrequencyRunner } from "../proxier/runner.ts";
import type { ConntrackRunner } from "../conntrack/runner.ts";
import type { Logger } from "./log.ts";
import { familyLabel, IP_FAMILIES, type IpFamily } from "../net/family.ts";
import type { ProxyMetrics } from "./metrics.ts";
import { ServiceTallies } from "./service_tallies.ts";
import { ConntrackFollowUp } from "./conntrack_follow_up.ts";
import { mallocTrim, settleMalloc } from "../ffi/malloc_trim.ts";
import type { NftNotification } from "../ffi/nftables/netlink/notify.ts";
import type { MonitorHandlers } from "../ffi/nftables/netlink/monitor.ts";
import { touchedBy } from "../proxier/nftables/foreign.ts";
import { TABLE } from "../proxier/nftables/names.ts";
import type {
  HealthNode,
  ProxierHealthServer,
  ServiceHealthEntry,
  ServiceHealthServers,
} from "./http/health.ts";

/**
 * Something that follows each family's sync from the state it applied (the localhost NodePort
 * proxy). Called once per family per round, whatever the sync's outcome; it must return at
 * once and do its work later, so it never delays a sync.
 */
export interface SyncFollower {
  /** `full`: a node change or the family's first sync, so every service port may have changed. */
  followSync(family: IpFamily, sync: FamilySync, full: boolean): void;
}

/** Settings and collaborators of a {@link SyncEngine}. */
export interface EngineOptions {
  /** The cluster state the informers feed and each sync applies. */
  state: ClusterState;
  /** One proxier per IP family this node runs. */
  proxiers: Partial<Record<IpFamily, Proxier>>;
  /** Shortest time between two syncs (`--min-sync-period`), in ms. */
  minSyncPeriodMs: number;
  /** Longest time without a sync (`--sync-period`), in ms. */
  syncPeriodMs: number;
  /**
   * The one clock of the periodic check of the whole ruleset against the
   * kernel (--full-sync-period, default 1 h, as upstream's periodic full resync).
   */
  fullCheckPeriodMs?: number;
  /**
   * nftables change notifications reach {@link SyncEngine.recordForeign}: the
   * idle --sync-period tick then checks nothing. Without them it compares the
   * whole ruleset with the kernel, as before.
   */
  monitored?: boolean;
  /** Where sync failures, drift and repairs are logged. */
  log: Logger;
  /** Sync latencies, counts and per-Service gauges; none when nothing scrapes them. */
  metrics?: ProxyMetrics;
  /** /healthz, stamped by each completed sync. */
  health?: ProxierHealthServer;
  /** The HealthCheckNodePort servers, kept up to date from the changed ids. */
  serviceHealth?: ServiceHealthServers;
  /** Post-sync stale UDP cleanup and the reconcile; omit for neither (a dry run). */
  conntrack?: ConntrackRunner;
  /** Period of the conntrack reconcile; 0 or omitted disables it. */
  reconcilePeriodMs?: number;
  /**
   * Run once after the first reconcile, whose Worker and index came after the cold start's
   * trim (default: `mallocTrim`, a compacting collection and glibc's trim); `then` runs after it.
   */
  trimMemory?: (then?: () => void) => void;
  /** Run once both lists are in, before the first sync (default: `settleMalloc`). */
  afterLists?: () => void;
  /**
   * Our table was already in the kernel at start-up (a restart). The first
   * sync then does not flush flows of services that merely look "newly
   * active": the rules that served them never went away.
   */
  adopted?: boolean;
  /** Told after each family's sync what it applied (see {@link SyncFollower}). */
  follower?: SyncFollower;
  /** Called after each completed sync with its number and the results of the families it synced. */
  onSync?: (n: number, results: Partial<Record<IpFamily, SyncResult>>) => void;
}

/** What one sync round did, for whoever schedules the next. */
export interface SyncRound {
  /** The results of the families that committed. */
  results: Partial<Record<IpFamily, SyncResult>>;
  /** A full sync stepped aside for a waiting change: sync again at once. */
  again: boolean;
  /** Sync again this many ms later (a stale chain waits for deletion). */
  followUpMs?: number;
  /** The first family's failure (the other family still synced). */
  failure?: unknown;
}

/** NFPROTO_* numbers of the families' tables (notifications name them so). */
const NFPROTO_IPV4 = 2, NFPROTO_IPV6 = 10;

/** The agent's sync loop. */
export class SyncEngine {
  readonly #o: EngineOptions;
  readonly #runner: BoundedFrequencyRunner;
  readonly #families: IpFamily[];
  #reconcileTimer: ReturnType<typeof setInterval> | undefined;
  readonly #ct: ConntrackFollowUp;
  #firstSync = new Set<IpFamily>();
  /** Per family: the no-local-endpoints counts and health entries, kept from changed IDs. */
  readonly #tallies: Record<IpFamily, ServiceTallies> = {
    4: new ServiceTallies(),
    6: new ServiceTallies(),
  };
  /** Per family: Service port ids changed since the tallies last caught up (a preempted or
   * failed sync leaves its changes here for the next commit). */
  readonly #untallied: Record<IpFamily, Set<string>> = { 4: new Set(), 6: new Set() };
  /** The informers that delivered their initial list; nothing is programmed before both have. */
  #synced = new Set<"services" | "endpointSlices">();
  #stopped = false;
  /** When the whole ruleset was last compared with the kernel (the first sync does it). */
  #lastCheckAt = Date.now();
  #monitored: boolean;
  /** Completed syncs (for tests and logs). */
  syncs = 0;
  /** The last sync's per-family results. */
  lastResults: Partial<Record<IpFamily, SyncResult>> = {};

  /** An engine over `opts`' proxiers; no sync runs until the informers report their first lists. */
  constructor(opts: EngineOptions) {
    this.#o = opts;
    this.#monitored = opts.monitored ?? false;
    this.#ct = new ConntrackFollowUp({
      runner: opts.conntrack,
      reconcilePeriodMs: opts.reconcilePeriodMs ?? 0,
      log: opts.log,
      metrics: opts.metrics,
      stopped: () => this.#stopped,
      // The trim hands back what the proxiers' rehearsals touched: they rehearse again after it.
      afterFirstReconcile: () =>
        (opts.trimMemory ?? mallocTrim)(() => {
          for (const f of this.#families) opts.proxiers[f]!.warmUp();
        }),
    });
    this.#families = IP_FAMILIES.filter((f) => opts.proxiers[f] !== undefined);
    for (const f of this.#families) this.#firstSync.add(f);
    this.#runner = new BoundedFrequencyRunner(() => this.#tick(), {
      minInterval: opts.minSyncPeriodMs,
      maxInterval: opts.syncPeriodMs,
      onError: (err, n) => {
        for (const f of this.#families) {
          opts.metrics?.nftablesSyncFailuresTotal.inc({ ip_family: familyLabel(f) });
        }
        opts.log.error("Sync failed; retrying with a full sync", err, { consecutiveFailures: n });
      },
    });
  }

  /** IP families this engine programs. */
  get families(): readonly IpFamily[] {
    return this.#families;
  }

  /** Starts the runner (it waits for the informers' initial sync) and the reconciler. */
  start(): void {
    this.#runner.start();
    const period = this.#o.reconcilePeriodMs ?? 0;
    if (this.#o.conntrack && period > 0) {
      this.#reconcileTimer = setInterval(() => void this.reconcileNow(), period);
    }
  }

  /** Stops syncing. Rules stay in the kernel. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#reconcileTimer);
    await this.#runner.stop();
  }

  /** A Service was added (prev null), updated or deleted (cur null). */
  recordService(prev: V1Service | null, cur: V1Service | null): void {
    if (this.#o.state.updateService(prev, cur)) {
      this.#o.metrics?.serviceChangesTotal.inc();
      this.#queued();
    }
  }

  /** An EndpointSlice was added, updated or deleted. */
  recordEndpointSlice(prev: EndpointSlice | null, cur: EndpointSlice | null): void {
    if (this.#o.state.updateEndpointSlice(prev, cur)) {
      this.#o.metrics?.endpointChangesTotal.inc();
      this.#queued();
    }
  }

  /** This node changed (null when deleted). */
  recordNode(node: V1Node | null): void {
    this.#o.health?.setNode((node ?? undefined) as HealthNode | undefined);
    if (this.#o.state.updateNode(node)) this.#queued();
  }

  /** A ServiceCIDR was added, updated or deleted. */
  recordServiceCIDR(prev: ServiceCIDR | null, cur: ServiceCIDR | null): void {
    if (this.#o.state.updateServiceCIDR(prev, cur)) this.#queued();
  }

  /** An informer finished its initial list; nothing is programmed before both have. */
  markSynced(what: "services" | "endpointSlices"): void {
    const was = this.ready;
    this.#synced.add(what);
    if (!this.ready) return;
    if (!was) (this.#o.afterLists ?? settleMalloc)();
    this.#runner.run();
  }

  /** True once Services and EndpointSlices have both delivered their initial list. */
  get ready(): boolean {
    return this.#synced.size === 2;
  }

  /**
   * Another program's nftables changes (one receive of notifications): the
   * families whose table they touched check and repair just those objects.
   */
  recordForeign(msgs: readonly NftNotification[]): void {
    let any = false;
    for (const f of this.#families) {
      const t = touchedBy(msgs, f === 4 ? NFPROTO_IPV4 : NFPROTO_IPV6, TABLE);
      if (t === undefined) continue;
      any = true;
      this.#o.proxiers[f]!.noteForeign(t);
      this.#o.log.v(2)?.info(
        "Another program changed our nftables table; checking what it touched",
        {
          ipFamily: familyLabel(f),
          by: [...t.by].join(", "),
          table: t.table,
          chains: t.chains.size,
          sets: t.sets.size,
          elementsOf: [...t.elements].slice(0, 5).join(", "),
        },
      );
    }
    if (any) this.#runner.run();
  }

  /** Notifications were lost (`why`; by default, the socket overran): compare everything once. */
  recordOverrun(why = "nftables change notifications overran"): void {
    this.#o.log.warn(`${why}; checking the whole ruleset`);
    for (const f of this.#families) {
      this.#o.proxiers[f]!.requestFullSync(why);
    }
    this.#runner.run();
  }

  /** The notifications stopped: fall back to comparing the ruleset on idle ticks. */
  monitorLost(err: Error): void {
    this.#o.log.error(
      "nftables change notifications stopped; checking the whole ruleset every --sync-period instead",
      err,
    );
    this.#monitored = false;
  }

  /** Requests a sync now (subject to the rate limit). */
  requestSync(): void {
    this.#runner.run();
  }

  #queued(): void {
    const now = Date.now() / 1000;
    for (const f of this.#families) {
      this.#o.health?.queued(f);
      this.#o.metrics?.syncProxyRulesLastQueuedTimestamp.set({ ip_family: familyLabel(f) }, now);
    }
    this.#o.metrics?.serviceChangesPending.set(this.#o.state.pendingServiceChanges);
    this.#o.metrics?.endpointChangesPending.set(this.#o.state.pendingEndpointChanges);
    // Before both initial lists are in, a run could only say "not yet" and would use up the
    // rate limit's burst that the first sync needs (markSynced starts it).
    if (this.ready) this.#runner.run();
  }

  /** The runner's work: one round, then what it asks for next. */
  async #tick(): Promise<void> {
    const round = await this.#round();
    if (round === undefined) return;
    // A full sync stepped aside for a waiting change: sync again at once.
    if (round.again) this.#runner.run();
    if (round.followUpMs !== undefined) this.#runner.runAfter(round.followUpMs);
    if (round.failure !== undefined) throw round.failure;
  }

  /**
   * Runs one sync now, outside the runner (for callers that never
   * {@link start} it and decide themselves when a sync runs: the dry run, the
   * fuzzer). Resolves undefined before both informers synced; throws the
   * first family's failure.
   */
  async syncNow(): Promise<SyncRound | undefined> {
    const round = await this.#round();
    if (round?.failure !== undefined) throw round.failure;
    return round;
  }

  /** Whether this sync also compares the whole ruleset with the kernel (and asks for it). */
  #verifying(input: ReturnType<ClusterState["apply"]>, contextChanged: boolean): boolean {
    const since = Date.now() - this.#lastCheckAt;
    let due = since >= (this.#o.fullCheckPeriodMs ?? 3_600_000);
    if (!this.#monitored) {
      // No notifications: the --sync-period tick with nothing to apply compares the whole
      // ruleset, so another program's changes are repaired within one period; under constant
      // churn no sync is idle, so check anyway every ten periods.
      const idle = !contextChanged &&
        this.#families.every((f) =>
          input.families[f].changed.size === 0 && input.families[f].deleted.size === 0
        );
      const period = this.#o.syncPeriodMs;
      due ||= (idle && since >= period * 0.9) || since >= period * 10;
    }
    const verifying = this.#firstSync.size === 0 && due;
    if (verifying) {
      this.#lastCheckAt = Date.now();
      for (const f of this.#families) {
        this.#o.proxiers[f]!.requestFullSync("periodic check against the kernel");
      }
    }
    return verifying;
  }

  async #round(): Promise<SyncRound | undefined> {
    if (this.#stopped) return undefined;
    const { state, metrics, log } = this.#o;
    if (!this.ready) {
      log.v(2)?.info("Not syncing rules until Services and EndpointSlices have been received");
      return undefined;
    }
    const t0 = performance.now();
    const input = state.apply();
    metrics?.serviceChangesPending.set(0);
    metrics?.endpointChangesPending.set(0);
    const contextChanged = input.nodeChanged || input.serviceCIDRsChanged;
    this.#verifying(input, contextChanged);
    const round: SyncRound = { results: {}, again: false };
    for (const f of this.#families) {
      const fam = input.families[f];
      for (const id of fam.changed) this.#untallied[f].add(id);
      for (const id of fam.deleted) this.#untallied[f].add(id);
      let res: SyncResult;
      try {
        res = await this.#o.proxiers[f]!.sync({ ...fam, contextChanged });
      } catch (err) {
        // The proxier forces its next sync full; the other family still syncs.
        round.failure ??= err;
        continue;
      } finally {
        this.#o.follower?.followSync(f, fam, contextChanged || this.#firstSync.has(f));
      }
      if (res.preempted) {
        round.again = true;
        continue;
      }
      this.lastResults[f] = round.results[f] = res;
      this.#committed(f, res, fam.state, input.triggerTimes);
      log.v(2)?.info("SyncProxyRules complete", {
        ipFamily: familyLabel(f),
        full: res.full,
        services: fam.state.services.size,
        changed: fam.changed.size,
        deleted: fam.deleted.size,
        operations: res.ops,
        transactions: res.txs,
        elapsed: `${(res.seconds * 1000).toFixed(1)}ms`,
      });
      if (res.followUpMs !== undefined) {
        round.followUpMs = Math.min(round.followUpMs ?? Infinity, res.followUpMs);
      }
      await this.#ct.cleanup(f, res.stale, this.#firstSync.has(f) && !!this.#o.adopted);
      this.#firstSync.delete(f);
    }
    this.#syncServiceHealth();
    if (round.failure !== undefined) return round;
    this.syncs++;
    this.#o.onSync?.(this.syncs, round.results);
    if (this.syncs === 1) {
      // Endpoints removed while no agent ran left no stale report behind; the
      // reconciler finds their flows, so run it now rather than a period later. On a later
      // turn: after the memory trim the full sync queued, so the Worker it starts and the
      // index it is handed do not add to the cold start's peak (30k Services: 264-271 MB
      // with them in it, 253-258 without; docs/benchmarks.md, seventh round).
      setTimeout(() => void this.reconcileNow(), 0);
    }
    log.v(4)?.info("Sync loop iteration done", {
      elapsed: `${(performance.now() - t0).toFixed(1)}ms`,
    });
    return round;
  }

  /** Metrics and health after a family's commit; a check's drift is a repair. */
  #committed(
    f: IpFamily,
    res: SyncResult,
    s: ProxyState,
    triggerTimes: readonly number[],
  ): void {
    const { metrics, health, log } = this.#o;
    const l = { ip_family: familyLabel(f) };
    // Only what the kernel had unlike the written state is a repair: stale chains deleted or
    // changes applied by the same sync are not.
    if ((res.drift?.count ?? 0) > 0) {
      metrics?.nftablesRepairsTotal.inc(l);
      log.warn(
        "Rules differed from what this agent wrote (another program changed them); restored",
        {
          ipFamily: familyLabel(f),
          differences: res.drift!.count,
          found: res.drift!.examples.join("; "),
          operations: res.ops,
        },
      );
    }
    metrics?.syncProxyRulesLatency.observe(l, res.seconds);
    (res.full ? metrics?.syncFullProxyRulesLatency : metrics?.syncPartialProxyRulesLatency)
      ?.observe(l, res.seconds);
    const committedAt = Date.now();
    metrics?.syncProxyRulesLastTimestamp.set(l, committedAt / 1000);
    for (const t of triggerTimes) {
      metrics?.networkProgrammingLatency.observe(l, Math.max(0, committedAt - t) / 1000);
    }
    // A full sync (first, periodic check, after a failure or a Node change) recounts every
    // Service; a partial one only those changed since the last commit.
    this.#tallies[f].update(s, res.full ? undefined : this.#untallied[f]);
    this.#ct.feedIndex(f, s, this.#untallied[f]);
    this.#untallied[f].clear();
    this.#noLocalEndpointsMetric(f);
    health?.updated(f);
  }

  /** Runs the conntrack reconciler over every family's programmed state. */
  async reconcileNow(): Promise<void> {
    await this.#ct.reconcile(this.#families.map((f) => [f, this.#o.proxiers[f]!.programmed]));
  }

  /** The handlers a notification monitor reports to. */
  monitorHandlers(): MonitorHandlers {
    return {
      onForeign: (msgs) => this.recordForeign(msgs),
      onOverrun: (why) => this.recordOverrun(why),
      onError: (err) => this.monitorLost(err),
    };
  }

  /** Per-family /metrics gauges of Services without local endpoints, from the tallies. */
  #noLocalEndpointsMetric(f: IpFamily): void {
    const m = this.#o.metrics?.noLocalEndpointsTotal;
    if (!m) return;
    const t = this.#tallies[f];
    m.set({ ip_family: familyLabel(f), traffic_policy: "internal" }, t.internal);
    m.set({ ip_family: familyLabel(f), traffic_policy: "external" }, t.external);
  }

  /** HealthCheckNodePort servers follow eTP=Local services and their local endpoints. */
  #syncServiceHealth(): void {
    const sh = this.#o.serviceHealth;
    if (!sh) return;
    const taken = this.#families.map((f) => this.#tallies[f].takeHealth());
    if (!taken.some((t) => t.changed)) return;
    const ports = new Map<number, ServiceHealthEntry>();
    for (const { entries } of taken) {
      for (const e of entries) {
        const prev = ports.get(e.port);
        ports.set(e.port, {
          service: e.service,
          localEndpoints: Math.max(prev?.localEndpoints ?? 0, e.localEndpoints),
        });
      }
    }
    void sh.sync(ports);
  }
}
