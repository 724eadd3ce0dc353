/**
 * The composition root of one node's proxy: the cluster state, one nftables
 * proxier per IP family and the sync engine over them, wired from the
 * agent's flags. The agent, the debug commands' dry run, the e2e drivers,
 * the fuzzer, the benchmarks and the golden tests all build through
 * {@link buildNode}, so they run the same wiring; they differ only in the
 * clients they hand in (libnftables or an in-memory table, a conntrack
 * Worker, an inline runner or none) and in a few options.
 *
 * @module
 */
import type { AgentConfig } from "./flags.ts";
import type { Logger } from "./log.ts";
import type { ProxyMetrics } from "./metrics.ts";
import type { ProxierHealthServer, ServiceHealthServers } from "./http/health.ts";
import type { ProxyInformerHandlers } from "./kube/informers.ts";
import { type EngineOptions, SyncEngine } from "./engine.ts";
import type { HostAddressSource } from "./host_addresses.ts";
import { nodeHostIPs } from "./kube/node_fetch.ts";
import type { NetOps } from "./localhost/listener.ts";
import { LocalhostProxy } from "./localhost/proxy.ts";
import { localhostFamilies, loopbackSelection } from "./localhost/selection.ts";
import { registerRejectedPackets } from "./localhost/rejected_metric.ts";
import { raiseFileLimit } from "../ffi/rlimit.ts";
import type { ConntrackRunner } from "../conntrack/runner.ts";
import type { NftablesClient } from "../ffi/nftables/types.ts";
import type { MonitorHandlers } from "../ffi/nftables/netlink/monitor.ts";
import type { QuietWrites } from "../ffi/nftables/netlink/generation.ts";
import { ClusterState } from "../proxier/cluster_state.ts";
import type { EndpointSlice, ServiceCIDR, V1Node, V1Service } from "../proxier/k8s_types.ts";
import type { ProxierConfig } from "../proxier/model.ts";
import { Proxier, type ProxierOptions } from "../proxier/nftables/proxier.ts";
import { familyLabel, familyOfText, IP_FAMILIES, type IpFamily } from "../net/family.ts";
import type { LogFn } from "../net/log.ts";

/** Maps the agent's flags to the rule builder's settings. */
export function proxierConfig(cfg: AgentConfig): ProxierConfig {
  let localDetector: ProxierConfig["localDetector"];
  switch (cfg.detectLocalMode) {
    case "ClusterCIDR":
      localDetector = cfg.clusterCIDRs.length > 0
        ? { mode: "ClusterCIDR", cidrs: cfg.clusterCIDRs }
        : { mode: "None" };
      break;
    case "NodeCIDR":
      localDetector = { mode: "NodeCIDR" };
      break;
    case "BridgeInterface":
      localDetector = { mode: "BridgeInterface", interface: cfg.podBridgeInterface ?? "" };
      break;
    case "InterfaceNamePrefix":
      localDetector = { mode: "InterfaceNamePrefix", prefix: cfg.podInterfaceNamePrefix ?? "" };
      break;
  }
  return {
    masqueradeAll: cfg.masqueradeAll,
    masqueradeBit: cfg.masqueradeBit,
    localDetector,
    // Empty means "primary", kube-proxy's nftables-mode default.
    nodePortAddresses: cfg.nodePortAddresses,
  };
}

/** IP families to run: those of the Node's primary IPs (InternalIP, else ExternalIP) and the node IP overrides. */
export function nodeFamilies(
  node: V1Node | undefined,
  nodeIPOverride: string | string[],
): IpFamily[] {
  const fams = new Set<IpFamily>(nodeHostIPs(node).map(familyOfText));
  for (const ip of typeof nodeIPOverride === "string" ? [nodeIPOverride] : nodeIPOverride) {
    if (ip && ip !== "0.0.0.0" && ip !== "::") fams.add(familyOfText(ip));
  }
  return IP_FAMILIES.filter((f) => fams.has(f));
}

/** The core's log callback over the agent's logger (info lines at verbosity 2). */
export function coreLog(log: Logger): LogFn {
  return (level, msg, fields) => {
    if (level === "error") log.error(msg, undefined, fields);
    else if (level === "warn") log.warn(msg, fields);
    else log.info(msg, fields, 2);
  };
}

/** What a node talks to. */
export interface NodeClients {
  /** Opens one family's nftables client: libnftables, the dry-run client or an in-memory table. */
  nftables(family: IpFamily): NftablesClient;
  /** The stale-flow cleanup and the reconcile; none in a dry run. */
  conntrack?: ConntrackRunner;
  /**
   * This host's interface addresses, which nodePortAddresses CIDRs select from; a change asks
   * for a sync. None (dry runs, goldens): CIDRs select among the Node object's addresses.
   */
  hostAddresses?: HostAddressSource;
  /**
   * Opens the nftables change notifications (ffi/nftables/netlink/monitor.ts);
   * without it, or when it throws, the idle --sync-period tick compares the whole ruleset.
   */
  monitor?: () => ForeignChanges;
}

/** A source of other programs' nftables changes. */
export interface ForeignChanges {
  /** Starts reporting to `h`. */
  start(h: MonitorHandlers): void;
  /** Stops reporting; resolves once the source is closed. */
  stop(): Promise<void>;
  /** Pauses the source around our large element batches (the clients' `quietWith`). */
  quiet?: QuietWrites;
}

/** Settings of {@link buildNode} that do not come from the flags. */
export interface NodeOptions {
  /** This node's name (hostname override, else the host name, lower case). */
  nodeName: string;
  /** The IP families to program (from the Node's IPs: {@link nodeFamilies}). */
  families: readonly IpFamily[];
  /** The agent's logger. */
  log: Logger;
  /** The metrics registry's series; none in tests and dry runs. */
  metrics?: ProxyMetrics;
  /** /healthz, which each sync stamps. */
  health?: ProxierHealthServer;
  /** The HealthCheckNodePort servers. */
  serviceHealth?: ServiceHealthServers;
  /** Whether our table was already there; by default, whether any family's table has chains (never in a dry run). */
  adopted?: boolean;
  /** Called after each completed sync (tests and drivers report it). */
  onSync?: EngineOptions["onSync"];
  /** Rule settings for callers that build states rather than flags (goldens, benchmarks). */
  rules?: ProxierConfig;
  /** Binds and dials for the localhost NodePort proxy (unit tests pass a fake); Deno's TCP by default. */
  localhostNet?: NetOps;
  /** Proxier knobs tests turn: a clock, transaction size, memory trimming. */
  proxier?: Pick<ProxierOptions, "now" | "maxOpsPerTransaction" | "trimMemory" | "yieldEveryMs">;
}

/** One node's proxy, built and not yet started. */
export interface ProxyNode {
  /** What the informers feed. */
  readonly state: ClusterState;
  /** The engine that syncs {@link ProxyNode.state} into the proxiers. */
  readonly engine: SyncEngine;
  /** One proxier per family of {@link NodeOptions.families}. */
  readonly proxiers: Partial<Record<IpFamily, Proxier>>;
  /** The nftables client of each family the proxiers write through. */
  readonly clients: Partial<Record<IpFamily, NftablesClient>>;
  /** Our table was found at start-up: a restart, whose first sync adopts it. */
  readonly adopted: boolean;
  /** The localhost NodePort proxy; it serves no family unless nodePortAddresses selects loopback. */
  readonly localhost: LocalhostProxy;
  /** Stops the engine (rules stay) and releases the conntrack runner and the clients. */
  close(): Promise<void>;
}

/** Builds the cluster state, the proxiers and the engine of one node. */
export async function buildNode(
  cfg: AgentConfig,
  clients: NodeClients,
  opts: NodeOptions,
): Promise<ProxyNode> {
  const log = coreLog(opts.log);
  const state = new ClusterState({
    nodeName: opts.nodeName,
    bindAddress: cfg.nodeIPOverride,
    externalIPs: cfg.gates.allowServiceExternalIPs,
    log,
  });
  // Read from this start's flags alone, whatever the previous run had (kubernetes issue 142183).
  const lhFamilies = localhostFamilies(
    loopbackSelection(cfg.nodePortAddresses),
    cfg.gates.localhostNodePorts,
    opts.families,
  );
  // Callers that pass their own rules (goldens, the tracer's tests) may set the reject rules' families.
  const rules = {
    ...(opts.rules ?? proxierConfig(cfg)),
    localhostNodePorts: opts.rules?.localhostNodePorts ?? lhFamilies,
  };
  const proxiers: Partial<Record<IpFamily, Proxier>> = {};
  const nft: Partial<Record<IpFamily, NftablesClient>> = {};
  let found = false;
  for (const f of opts.families) {
    const client = nft[f] = clients.nftables(f);
    if (opts.adopted === undefined && !cfg.dryRun && (await client.listChains()).length > 0) {
      found = true;
    }
    proxiers[f] = new Proxier({
      ...opts.proxier,
      client,
      config: rules,
      // A long full sync steps aside for a change waiting behind it.
      shouldYield: () => state.hasPendingChanges(),
      hostAddresses: () => clients.hostAddresses?.current(),
      log,
    });
  }
  const adopted = opts.adopted ?? found;
  // A dry run shows the rules but binds no port.
  const localhost = localhostProxy(cfg.dryRun ? [] : lhFamilies, nft, opts);
  const monitor = openMonitor(clients, opts.log);
  const quiet = monitor?.quiet;
  if (quiet !== undefined) { for (const c of Object.values(nft)) c.quietWith?.(quiet); }
  const engine = new SyncEngine({
    state,
    proxiers,
    minSyncPeriodMs: cfg.minSyncPeriodMs,
    syncPeriodMs: cfg.syncPeriodMs,
    fullCheckPeriodMs: cfg.fullSyncPeriodMs,
    monitored: monitor !== undefined,
    log: opts.log,
    metrics: opts.metrics,
    health: opts.health,
    serviceHealth: opts.serviceHealth,
    conntrack: clients.conntrack,
    reconcilePeriodMs: cfg.conntrackReconcilerPeriodMs,
    adopted,
    onSync: opts.onSync,
    follower: localhost.families.length > 0 ? localhost : undefined,
  });
  clients.hostAddresses?.watch(() => engine.requestSync());
  monitor?.start(engine.monitorHandlers());
  return {
    state,
    engine,
    proxiers,
    clients: nft,
    adopted,
    localhost,
    async close() {
      clients.hostAddresses?.close();
      await engine.stop();
      await monitor?.stop();
      localhost.close();
      clients.conntrack?.close();
      for (const c of Object.values(nft)) c.close();
    },
  };
}

/** The localhost NodePort proxy for `families` (none: it serves nothing), with its metric. */
function localhostProxy(
  families: readonly IpFamily[],
  nft: Partial<Record<IpFamily, NftablesClient>>,
  opts: NodeOptions,
): LocalhostProxy {
  const localhost = new LocalhostProxy({
    families: [...families],
    log: opts.log,
    metrics: opts.metrics,
    net: opts.localhostNet,
  });
  if (localhost.families.length === 0) return localhost;
  if (opts.metrics) registerRejectedPackets(opts.metrics.registry, nft, localhost.families);
  opts.log.info("Serving NodePorts on localhost through a userspace proxy (KEP-6032)", {
    ipFamilies: localhost.families.map(familyLabel),
  });
  raiseFileLimitFor(opts.log, opts.localhostNet !== undefined);
  return localhost;
}

/** The nftables change notifications, or undefined (with a warning) when they cannot be had. */
function openMonitor(clients: NodeClients, log: Logger): ForeignChanges | undefined {
  try {
    return clients.monitor?.();
  } catch (err) {
    log.warn(
      "No nftables change notifications; comparing the whole ruleset every --sync-period instead",
      { err: String(err) },
    );
    return undefined;
  }
}

/**
 * Two descriptors per proxied connection: the soft open-file limit goes up to the hard one, as
 * Go's runtime does for kube-proxy (a container's soft limit is often 1024). Not with a fake
 * network (unit tests), which holds no descriptors.
 */
function raiseFileLimitFor(log: Logger, fake: boolean): void {
  if (fake) return;
  try {
    const { before, after } = raiseFileLimit();
    if (before.soft !== after.soft) {
      log.info("Raised the open-file limit for the localhost NodePort proxy", {
        from: before.soft,
        to: after.soft,
      });
    }
  } catch (err) {
    log.warn(
      "Could not raise the open-file limit; proxied connections may run out of descriptors",
      {
        err: String(err),
      },
    );
  }
}

/** The informers' callbacks, each bound to the engine's `record*` (the one route of an event). */
export function informerHandlers(engine: SyncEngine): Required<ProxyInformerHandlers> {
  return {
    services: {
      onAdd: (o) => engine.recordService(null, o as V1Service),
      onUpdate: (a, b) => engine.recordService(a as V1Service, b as V1Service),
      onDelete: (o) => engine.recordService(o as V1Service, null),
      onSynced: () => engine.markSynced("services"),
    },
    endpointSlices: {
      onAdd: (o) => engine.recordEndpointSlice(null, o as EndpointSlice),
      onUpdate: (a, b) => engine.recordEndpointSlice(a as EndpointSlice, b as EndpointSlice),
      onDelete: (o) => engine.recordEndpointSlice(o as EndpointSlice, null),
      onSynced: () => engine.markSynced("endpointSlices"),
    },
    node: {
      onAdd: (o) => engine.recordNode(o as V1Node),
      onUpdate: (_a, b) => engine.recordNode(b as V1Node),
      onDelete: () => engine.recordNode(null),
    },
    serviceCIDRs: {
      onAdd: (o) => engine.recordServiceCIDR(null, o as ServiceCIDR),
      onUpdate: (a, b) => engine.recordServiceCIDR(a as ServiceCIDR, b as ServiceCIDR),
      onDelete: (o) => engine.recordServiceCIDR(o as ServiceCIDR, null),
    },
  };
}
