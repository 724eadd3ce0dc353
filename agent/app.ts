/**
 * The agent program: parses flags, connects to the cluster, and runs the
 * informers, the sync engine, the conntrack work and the HTTP servers on one
 * event loop until SIGTERM/SIGINT (which leave the rules in place).
 *
 * @module
 */
import {
  AGENT_VERSION,
  type AgentConfig,
  parseArgs,
  usage,
  UsageError,
  versionText,
} from "./flags.ts";
import { createSink, Logger, type LogSink } from "./log.ts";
import { createMetrics, serveMetrics } from "./metrics.ts";
import { setRestClientMetrics } from "./rest_metrics.ts";
import { configzBody, effectiveConfiguration } from "./configz.ts";
import { bindAddressesFor, localIPs } from "./bind_addresses.ts";
import { watchConfigFile } from "./config_watch.ts";
import { stringify as stringifyYaml } from "yaml";
import { ApiFetch } from "./api_fetch.ts";
import { type NodeEvent, postNodeEvent, postStartingEvent } from "./events.ts";
import { installHeapSnapshotSignal } from "./heap_snapshot.ts";
import { ProxierHealthServer, ServiceHealthServers } from "./health.ts";
import { KubeConfigError, loadKubeConfig } from "./kubeconfig.ts";
import { tuneMalloc } from "../ffi/malloc_trim.ts";
import { type ProxyInformers, startProxyInformers } from "./informers.ts";
import { SyncEngine } from "./engine.ts";
import { familyOfText, IP_FAMILIES, type IpFamily, nftFamily } from "../net/family.ts";
import { setLibraryDir } from "../ffi/libpath.ts";
import { openNftables } from "../ffi/nftables/client.ts";
import { DryRunNftables } from "../ffi/nftables/dry_run.ts";
import { type NftablesClient, NftablesError, Transaction } from "../ffi/nftables/types.ts";
import { LibraryNotFoundError } from "../ffi/conntrack/types.ts";
import { ClusterState } from "../proxier/cluster_state.ts";
import type { EndpointSlice, ServiceCIDR, V1Node, V1Service } from "../proxier/k8s_types.ts";
import type { ProxierConfig } from "../proxier/model.ts";
import { Proxier } from "../proxier/nftables/proxier.ts";
import { TABLE } from "../proxier/nftables/names.ts";
import { ReconcileWorker } from "../conntrack/worker.ts";
import { applyConntrackSysctls } from "../conntrack/sysctl.ts";
import * as libcFiles from "../ffi/libc_files.ts";

/** How long to wait for this node's Node object before picking IP families without it. */
const NODE_WAIT_MS = 30_000;

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

function openClient(f: IpFamily, dryRun: boolean): NftablesClient {
  return dryRun ? new DryRunNftables(nftFamily(f), TABLE) : openNftables(nftFamily(f), TABLE);
}

/** `--cleanup`: deletes our tables (missing ones are fine). */
async function cleanup(log: Logger): Promise<number> {
  let failed = false;
  for (const f of IP_FAMILIES) {
    const client = openNftables(nftFamily(f), TABLE);
    try {
      await client.run(new Transaction().delete({ kind: "table" }));
      log.info("Deleted table", { table: `${nftFamily(f)} ${TABLE}` });
    } catch (err) {
      if (err instanceof NftablesError && err.notFound) {
        log.info("No table to delete", { table: `${nftFamily(f)} ${TABLE}` });
      } else {
        failed = true;
        log.error("Cannot delete table", err, { table: `${nftFamily(f)} ${TABLE}` });
      }
    } finally {
      client.close();
    }
  }
  return failed ? 1 : 0;
}

/** IP families to run: those of the Node's primary IPs (InternalIP, else ExternalIP) and the node IP overrides. */
export function nodeFamilies(
  node: V1Node | undefined,
  nodeIPOverride: string | string[],
): IpFamily[] {
  const fams = new Set<IpFamily>();
  const addrs = node?.status?.addresses ?? [];
  for (const type of ["InternalIP", "ExternalIP"]) {
    const ips = addrs.filter((a) => a.type === type && a.address).map((a) => a.address!);
    for (const ip of ips) fams.add(familyOfText(ip));
    if (ips.length > 0) break;
  }
  for (const ip of typeof nodeIPOverride === "string" ? [nodeIPOverride] : nodeIPOverride) {
    if (ip && ip !== "0.0.0.0" && ip !== "::") fams.add(familyOfText(ip));
  }
  return IP_FAMILIES.filter((f) => fams.has(f));
}

/** Test hooks of {@link runAgent}. */
export interface RunOptions {
  /** Stops the agent like SIGTERM. */
  signal?: AbortSignal;
  /** Where log lines go (default: as the logging flags say, stderr unless told otherwise). */
  sink?: LogSink;
}

/** Exit status after the --config file changed (upstream returns an error: status 1). */
export const EXIT_CONFIG_CHANGED = 1;

/** Runs the agent with the given arguments; resolves with the exit code. */
export async function runAgent(argv: string[], opts: RunOptions = {}): Promise<number> {
  let cfg: AgentConfig;
  let configText = "";
  try {
    cfg = parseArgs(argv, (path) => (configText = Deno.readTextFileSync(path)));
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`kube-nft-proxy: ${err.message}\nRun 'kube-nft-proxy --help' for usage.`);
      return 2;
    }
    throw err;
  }
  if (cfg.help) {
    console.log(usage());
    return 0;
  }
  if (cfg.version) {
    console.log(versionText(cfg.version === "raw"));
    return 0;
  }
  let sink = opts.sink;
  try {
    sink ??= createSink({
      splitStream: cfg.logSplitStream,
      file: cfg.logFile,
      alsoStderr: cfg.alsoLogToStderr,
    });
  } catch (err) {
    console.error(`kube-nft-proxy: cannot open --log-file ${cfg.logFile}: ${err}`);
    return 1;
  }
  const log = new Logger({ verbosity: cfg.verbosity, format: cfg.loggingFormat, sink });
  for (const w of cfg.warnings) log.warn(w);
  const libDir = cfg.libDir ?? Deno.env.get("KUBE_NFT_PROXY_LIB_DIR");
  if (libDir) setLibraryDir(libDir);

  if (cfg.writeConfigTo) {
    try {
      Deno.writeTextFileSync(cfg.writeConfigTo, stringifyYaml(effectiveConfiguration(cfg)));
    } catch (err) {
      log.error(`Cannot write the configuration to ${cfg.writeConfigTo}`, err);
      return 1;
    }
    log.info("Wrote the effective configuration", { path: cfg.writeConfigTo });
    return 0;
  }
  if (cfg.initOnly) {
    if (cfg.dryRun) return 0;
    applyNodeSysctls(cfg, log);
    log.info("Node setup done (--init-only); exiting");
    return 0;
  }

  try {
    if (cfg.cleanup) return await cleanup(log);
    return await serve(cfg, log, opts.signal, configText);
  } catch (err) {
    if (err instanceof LibraryNotFoundError || err instanceof KubeConfigError) {
      log.error(err.message);
      return 1;
    }
    log.error("Fatal error", err);
    return 1;
  }
}

/** The privileged node setup: conntrack sysctls (what --init-only does, then exits). */
function applyNodeSysctls(cfg: AgentConfig, log: Logger): void {
  try {
    applyConntrackSysctls({
      maxPerCore: cfg.conntrack.maxPerCore,
      min: cfg.conntrack.min,
      tcpEstablishedTimeoutSeconds: cfg.conntrack.tcpEstablishedTimeoutMs / 1000,
      tcpCloseWaitTimeoutSeconds: cfg.conntrack.tcpCloseWaitTimeoutMs / 1000,
      tcpBeLiberal: cfg.conntrack.tcpBeLiberal,
      udpTimeoutSeconds: cfg.conntrack.udpTimeoutMs / 1000,
      udpStreamTimeoutSeconds: cfg.conntrack.udpStreamTimeoutMs / 1000,
    }, { log: (msg: string) => log.info(msg), io: libcFiles });
  } catch (err) {
    log.error("Cannot apply conntrack sysctls; continuing without them", err);
  }
}

/** The listeners of a server: its v1alpha2 CIDRs resolved on this host, or its one address. */
function listenAddresses(
  cidrs: AgentConfig["healthzBindCIDRs"],
  address: string,
  ips: () => string[],
): string[] {
  if (!cidrs) return address ? [address] : [];
  const local = ips();
  return bindAddressesFor(cidrs, local, local.some((ip) => ip.includes(":")));
}

async function serve(
  cfg: AgentConfig,
  log: Logger,
  signal: AbortSignal | undefined,
  configText: string,
): Promise<number> {
  tuneMalloc();
  const nodeName = (cfg.hostnameOverride ?? Deno.hostname()).trim().toLowerCase();
  const kube = loadKubeConfig({
    kubeconfig: cfg.kubeconfig,
    master: cfg.master,
    log: log.child("kubeconfig"),
  });
  log.info("Starting kube-nft-proxy", {
    version: AGENT_VERSION,
    node: nodeName,
    apiServer: kube.server,
    credentials: kube.source,
    dryRun: cfg.dryRun,
  });
  for (const w of kube.warnings) log.warn(w);
  if (kube.clientNode) {
    log.info("Loading @kubernetes/client-node for the API connection", {
      reason: kube.clientNode,
      nativeFetch: kube.creds.nativeFetch,
    });
  }

  // Fail early, before touching the cluster, when the libraries are missing.
  if (!cfg.dryRun) openClient(4, false).close();

  const metrics = createMetrics();
  // Every request to the API server from here on is counted (client-go's rest client metrics).
  setRestClientMetrics(metrics.restClient);
  const health = new ProxierHealthServer({
    healthTimeoutMs: 2 * cfg.syncPeriodMs,
    metrics,
    log: log.child("healthz"),
  });
  const servers: { close(): Promise<void> }[] = [health];
  const api = new ApiFetch(kube.creds);
  const events = log.child("events");
  // A server that cannot bind is fatal (upstream's bindAddressHardFail); say so on the Node
  // first, with upstream's reason.
  const bindOrReport = async (reason: string, bind: () => void) => {
    try {
      bind();
    } catch (err) {
      const e: NodeEvent = { type: "Warning", reason, action: "StartKubeProxy", note: `${err}` };
      if (await api.usable()) await postNodeEvent(api, nodeName, e, events);
      for (const s of servers) await s.close();
      throw err;
    }
  };
  if (!cfg.dryRun) {
    for (const addr of listenAddresses(cfg.healthzBindCIDRs, cfg.healthzBindAddress, localIPs)) {
      await bindOrReport("FailedToStartProxierHealthcheck", () => health.serve(addr));
    }
    for (const addr of listenAddresses(cfg.metricsBindCIDRs, cfg.metricsBindAddress, localIPs)) {
      await bindOrReport("FailedToStartMetricServer", () => {
        const m = serveMetrics(addr, metrics.registry, {
          configz: () => configzBody(cfg)["kubeproxy.config.k8s.io"],
        });
        servers.push({ close: () => m.shutdown() });
      });
    }
  }
  if (!cfg.dryRun) applyNodeSysctls(cfg, log);

  const stateLog = (
    level: "info" | "warn" | "error",
    msg: string,
    fields?: Record<string, unknown>,
  ) => {
    if (level === "error") log.error(msg, undefined, fields);
    else if (level === "warn") log.warn(msg, fields);
    else log.info(msg, fields, 2);
  };
  const state = new ClusterState({
    nodeName,
    bindAddress: cfg.nodeIPOverride,
    log: stateLog,
  });

  // Set once the node's IP families are known; events before that go straight into the state.
  const live: { engine?: SyncEngine } = {};
  const synced = new Set<"services" | "endpointSlices">();
  let lastNode: V1Node | undefined;
  let nodeSeen: () => void = () => {};
  const nodeArrived = new Promise<void>((res) => (nodeSeen = res));
  const handlers = {
    services: {
      onAdd: (o: unknown) =>
        rec(
          () => live.engine!.recordService(null, o as V1Service),
          () => state.updateService(null, o as V1Service),
        ),
      onUpdate: (a: unknown, b: unknown) =>
        rec(
          () => live.engine!.recordService(a as V1Service, b as V1Service),
          () => state.updateService(a as V1Service, b as V1Service),
        ),
      onDelete: (o: unknown) =>
        rec(
          () => live.engine!.recordService(o as V1Service, null),
          () => state.updateService(o as V1Service, null),
        ),
      onSynced: () => markSynced("services"),
    },
    endpointSlices: {
      onAdd: (o: unknown) =>
        rec(
          () => live.engine!.recordEndpointSlice(null, o as EndpointSlice),
          () => state.updateEndpointSlice(null, o as EndpointSlice),
        ),
      onUpdate: (a: unknown, b: unknown) =>
        rec(
          () => live.engine!.recordEndpointSlice(a as EndpointSlice, b as EndpointSlice),
          () => state.updateEndpointSlice(a as EndpointSlice, b as EndpointSlice),
        ),
      onDelete: (o: unknown) =>
        rec(
          () => live.engine!.recordEndpointSlice(o as EndpointSlice, null),
          () => state.updateEndpointSlice(o as EndpointSlice, null),
        ),
      onSynced: () => markSynced("endpointSlices"),
    },
    node: {
      onAdd: (o: unknown) => {
        rec(() => live.engine!.recordNode(o as V1Node), () => state.updateNode(o as V1Node));
        health.setNode(o as never);
        lastNode = o as V1Node;
        nodeSeen();
      },
      onUpdate: (_a: unknown, b: unknown) => {
        rec(() => live.engine!.recordNode(b as V1Node), () => state.updateNode(b as V1Node));
        health.setNode(b as never);
      },
      onDelete: () => {
        rec(() => live.engine!.recordNode(null), () => state.updateNode(null));
        health.setNode(undefined);
      },
    },
    serviceCIDRs: {
      onAdd: (o: unknown) =>
        rec(
          () => live.engine!.recordServiceCIDR(null, o as ServiceCIDR),
          () => state.updateServiceCIDR(null, o as ServiceCIDR),
        ),
      onUpdate: (a: unknown, b: unknown) =>
        rec(
          () => live.engine!.recordServiceCIDR(a as ServiceCIDR, b as ServiceCIDR),
          () => state.updateServiceCIDR(a as ServiceCIDR, b as ServiceCIDR),
        ),
      onDelete: (o: unknown) =>
        rec(
          () => live.engine!.recordServiceCIDR(o as ServiceCIDR, null),
          () => state.updateServiceCIDR(o as ServiceCIDR, null),
        ),
    },
  };
  function rec(withEngine: () => void, early: () => unknown): void {
    if (live.engine) withEngine();
    else early();
  }
  function markSynced(what: "services" | "endpointSlices"): void {
    synced.add(what);
    live.engine?.markSynced(what);
  }

  const informers: ProxyInformers = startProxyInformers({
    api,
    nodeName,
    handlers,
    onHealth: (resource, ok) => health.setWatchHealthy(resource, ok),
    log: log.child("informers"),
  });
  if (!cfg.dryRun) {
    void api.usable().then((ok) =>
      ok
        ? postStartingEvent(api, nodeName, events)
        : events.v(2)?.info("Not recording Events: native fetch cannot reach this cluster")
    );
  }

  let stopping = false;
  let exitCode = 0;
  let resolveStop: () => void = () => {};
  const stopped = new Promise<void>((res) => (resolveStop = res));
  const onSignal = () => {
    if (stopping) return;
    stopping = true;
    log.info("Shutting down; rules stay in place");
    resolveStop();
  };
  const configWatch = cfg.configFile === undefined ? undefined : watchConfigFile(cfg.configFile, {
    initial: configText,
    onChange: () => {
      if (stopping) return;
      log.info("The configuration file changed; exiting so that the restart reads it", {
        path: cfg.configFile,
      });
      exitCode = EXIT_CONFIG_CHANGED;
      onSignal();
    },
  });
  const signals: Deno.Signal[] = ["SIGTERM", "SIGINT"];
  for (const s of signals) Deno.addSignalListener(s, onSignal);
  signal?.addEventListener("abort", onSignal);
  const uninstallHeapSnapshot = installHeapSnapshotSignal(log);

  // The IP families follow from the node's IPs, so wait (bounded) for the Node.
  const timer = new Promise<void>((res) => setTimeout(res, NODE_WAIT_MS));
  await Promise.race([nodeArrived, timer, stopped]);
  let families = nodeFamilies(lastNode, cfg.nodeIPOverride);
  if (families.length === 0) {
    log.warn("No node IP known (Node object missing or without addresses); running IPv4 only", {
      node: nodeName,
    });
    families = [4];
  }

  const pcfg = proxierConfig(cfg);
  const clients: NftablesClient[] = [];
  const proxiers: Partial<Record<IpFamily, Proxier>> = {};
  let adopted = false;
  for (const f of families) {
    const client = openClient(f, cfg.dryRun);
    clients.push(client);
    if (!cfg.dryRun && (await client.listChains()).length > 0) adopted = true;
    proxiers[f] = new Proxier({
      client,
      config: pcfg,
      fullSyncPeriodMs: cfg.fullSyncPeriodMs,
      // A long full sync steps aside for a change waiting behind it.
      shouldYield: () => state.hasPendingChanges(),
      log: stateLog,
    });
  }
  if (adopted) {
    log.info("Adopting the existing kube-proxy tables; the first sync rewrites them atomically");
  }

  const worker = cfg.dryRun ? undefined : new ReconcileWorker();
  const serviceHealth = cfg.dryRun ? undefined : new ServiceHealthServers({
    proxyHealthy: () => health.health().healthy,
    log: log.child("service-health"),
  });
  const engine = new SyncEngine({
    state,
    proxiers,
    minSyncPeriodMs: cfg.minSyncPeriodMs,
    syncPeriodMs: cfg.syncPeriodMs,
    log,
    metrics,
    health,
    serviceHealth,
    cleanup: worker ? (f, report) => worker.cleanup(f, report) : undefined,
    reconcile: worker && cfg.conntrackReconcilerPeriodMs > 0
      ? { fn: (f, s) => worker.reconcile(f, s), periodMs: cfg.conntrackReconcilerPeriodMs }
      : undefined,
    adopted,
  });
  live.engine = engine;
  for (const s of synced) engine.markSynced(s);
  log.info("Running", { families: families.map((f) => `IPv${f}`).join(",") });
  engine.start();
  engine.requestSync();

  await stopped;
  configWatch?.close();
  for (const s of signals) Deno.removeSignalListener(s, onSignal);
  uninstallHeapSnapshot();
  await informers.stop();
  await engine.stop();
  worker?.close();
  await serviceHealth?.close();
  for (const s of servers) await s.close();
  for (const c of clients) c.close();
  log.info("Stopped");
  return exitCode;
}
