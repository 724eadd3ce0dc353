/**
 * The agent program: parses flags, connects to the cluster, and runs the
 * informers, the sync engine, the conntrack work and the HTTP servers on one
 * event loop until SIGTERM/SIGINT, a --config edit, or a change of its Node's IPs or
 * its deletion (agent/node_lifecycle.ts); all of them leave the rules in place.
 *
 * @module
 */
import { NftablesMonitor } from "../ffi/nftables/netlink/monitor.ts";
import { startStallProbe } from "./loop_stall.ts";
import {
  AGENT_VERSION,
  type AgentConfig,
  parseArgs,
  usage,
  UsageError,
  versionText,
} from "./flags.ts";
import { createSink, Logger, type LogSink } from "./log.ts";
import { effectiveConfiguration } from "./http/configz.ts";
import { type Servers, startServers } from "./http/http_servers.ts";
import { watchConfigFile } from "./config_watch.ts";
import { stringify as stringifyYaml } from "yaml";
import { ApiFetch } from "./kube/api_fetch.ts";
import { postNodeEvent, postStartingEvent } from "./kube/events.ts";
import { installHeapSnapshotSignal } from "./heap_snapshot.ts";
import { openHostAddresses } from "./host_addresses.ts";
import { ServiceHealthServers } from "./http/health.ts";
import { KubeConfigError, loadKubeConfig } from "./kube/kubeconfig.ts";
import { deferTrimWhile, tuneMalloc } from "../ffi/malloc_trim.ts";
import { type ProxyInformers, startProxyInformers } from "./kube/informers.ts";
import { fetchNode } from "./kube/node_fetch.ts";
import { buildNode, coreLog, informerHandlers, nodeFamilies, type ProxyNode } from "./node.ts";
import { afterFirstSync, removeIptablesNft } from "./migrate/iptables_nft.ts";
import { guardNodeHandlers, type NodeGuardHooks, NodeLifecycle } from "./node_lifecycle.ts";
import { IP_FAMILIES, type IpFamily, nftFamily } from "../net/family.ts";
import { setLibraryDir } from "../ffi/libpath.ts";
import { openNftables } from "../ffi/nftables/client.ts";
import { DryRunNftables } from "../ffi/nftables/dry_run.ts";
import { type NftablesClient, NftablesError, Transaction } from "../ffi/nftables/types.ts";
import { LibraryNotFoundError } from "../ffi/conntrack/types.ts";
import type { V1Node } from "../proxier/k8s_types.ts";
import { TABLE } from "../proxier/nftables/names.ts";
import { workerConntrack } from "../conntrack/runner.ts";
import { applyConntrackSysctls } from "../conntrack/sysctl.ts";
import * as libcFiles from "../ffi/libc_files.ts";

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

/** Test hooks of {@link runAgent}. */
export interface RunOptions {
  /** Stops the agent like SIGTERM. */
  signal?: AbortSignal;
  /** Where log lines go (default: as the logging flags say, stderr unless told otherwise). */
  sink?: LogSink;
}

/** Exit status after the --config file changed (upstream returns an error: status 1). */
export const EXIT_CONFIG_CHANGED = 1;

/** Exit status after the Node's IPs changed or the Node was deleted (upstream's os.Exit(1)). */
export const EXIT_NODE_CHANGED = 1;

/** How long an exit waits for its Event to be posted. */
const EVENT_TIMEOUT_MS = 5_000;

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

/** SIGTERM/SIGINT, the caller's signal and a --config edit all stop the agent. */
function stopControl(cfg: AgentConfig, log: Logger, configText: string, signal?: AbortSignal) {
  const abort = new AbortController();
  let exitCode = 0;
  const onSignal = () => {
    if (abort.signal.aborted) return;
    log.info("Shutting down; rules stay in place");
    abort.abort();
  };
  const configWatch = cfg.configFile === undefined ? undefined : watchConfigFile(cfg.configFile, {
    initial: configText,
    onChange: () => {
      if (abort.signal.aborted) return;
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
  const stopped = new Promise<void>((res) => abort.signal.addEventListener("abort", () => res()));
  return {
    signal: abort.signal,
    stopped,
    exitCode: () => exitCode,
    /** Stops as SIGTERM does (rules stay), with exit status `code`. */
    exit(code: number) {
      if (abort.signal.aborted) return;
      exitCode = code;
      onSignal();
    },
    close() {
      configWatch?.close();
      for (const s of signals) Deno.removeSignalListener(s, onSignal);
      uninstallHeapSnapshot();
    },
  };
}

/** Builds this node's proxy for the families its Node shows, with production's clients. */
async function buildAgentNode(
  cfg: AgentConfig,
  log: Logger,
  nodeName: string,
  node: V1Node | undefined,
  servers: Servers,
): Promise<{ node: ProxyNode; serviceHealth?: ServiceHealthServers }> {
  let families = nodeFamilies(node, cfg.nodeIPOverride);
  if (families.length === 0) {
    log.warn("No node IP known (Node object missing or without addresses); running IPv4 only", {
      node: nodeName,
    });
    families = [4];
  }
  const { health } = servers;
  const serviceHealth = cfg.dryRun ? undefined : new ServiceHealthServers({
    proxyHealthy: () => health.health().healthy,
    log: log.child("service-health"),
  });
  const built = await buildNode(cfg, {
    nftables: (f) => openClient(f, cfg.dryRun),
    conntrack: cfg.dryRun ? undefined : workerConntrack(),
    monitor: cfg.dryRun
      ? undefined
      : () => new NftablesMonitor(undefined, { log: coreLog(log.child("nftables-monitor")) }),
    hostAddresses: cfg.dryRun ? undefined : openHostAddresses(log),
  }, {
    nodeName,
    families,
    log,
    metrics: servers.metrics,
    health,
    serviceHealth,
    onSync: cfg.cleanupIptablesNft
      ? iptablesNftCleanup(cfg, log, nodeName, servers, families)
      : undefined,
  });
  if (built.adopted) {
    log.info("Adopting the existing kube-proxy tables; the first sync rewrites them atomically");
  }
  // The compacting collection after a big sync waits for the changes that arrived meanwhile.
  deferTrimWhile(() => built.state.hasPendingChanges());
  return { node: built, serviceHealth };
}

/**
 * --cleanup-iptables-nft: once every family has synced (our rules are in place), remove what
 * kube-proxy's iptables mode left in the iptables-nft tables (agent/migrate/iptables_nft.ts).
 */
function iptablesNftCleanup(
  cfg: AgentConfig,
  log: Logger,
  nodeName: string,
  servers: Servers,
  families: IpFamily[],
) {
  const mlog = log.child("iptables-nft");
  const events = log.child("events");
  return afterFirstSync(families, () =>
    void removeIptablesNft({
      open: (family, table) => openNftables(family, table),
      log: mlog,
      dryRun: cfg.dryRun,
      registry: servers.metrics.registry,
      event: cfg.dryRun
        ? undefined
        : (e) =>
          void servers.api.usable().then((ok) =>
            ok ? postNodeEvent(servers.api, nodeName, e, events) : undefined
          ).catch(() => {}),
    }));
}

/**
 * The agent, in upstream's order: servers, then this node's Node (waited
 * for with backoff), then the engine, then the informers feeding it.
 */
async function serve(
  cfg: AgentConfig,
  log: Logger,
  signal: AbortSignal | undefined,
  configText: string,
): Promise<number> {
  tuneMalloc();
  const nodeName = (cfg.hostnameOverride ?? Deno.hostname()).trim().toLowerCase();
  const kube = connect(cfg, log, nodeName);
  // Fail early, before touching the cluster, when the libraries are missing.
  if (!cfg.dryRun) openClient(4, false).close();
  const servers = await startServers(cfg, log, nodeName, new ApiFetch(kube.creds));
  startStallProbe(servers.metrics.registry);
  if (!cfg.dryRun) applyNodeSysctls(cfg, log);
  const stop = stopControl(cfg, log, configText, signal);
  const { api } = servers;
  const events = log.child("events");
  const nodeObj = await fetchNode({ api, nodeName, log, signal: stop.signal });
  if (!stop.signal.aborted) {
    const { node, serviceHealth } = await buildAgentNode(cfg, log, nodeName, nodeObj, servers);
    if (nodeObj) node.engine.recordNode(nodeObj);
    const handlers = guardNodeHandlers(
      informerHandlers(node.engine),
      new NodeLifecycle(nodeName, nodeObj),
      nodeExitHooks(api, nodeName, log, events, stop.exit, cfg.dryRun),
    );
    const informers: ProxyInformers = startProxyInformers({
      api,
      nodeName,
      handlers,
      onHealth: (resource, ok) => servers.health.setWatchHealthy(resource, ok),
      log: log.child("informers"),
    });
    if (!cfg.dryRun) {
      void api.usable().then((ok) =>
        ok
          ? postStartingEvent(api, nodeName, events)
          : events.v(2)?.info("Not recording Events: native fetch cannot reach this cluster")
      );
    }
    log.info("Running", { families: node.engine.families.map((f) => `IPv${f}`).join(",") });
    node.engine.start();
    node.engine.requestSync();
    await stop.stopped;
    await informers.stop();
    await node.close();
    await serviceHealth?.close();
  }
  stop.close();
  await servers.close();
  log.info("Stopped");
  return stop.exitCode();
}

/** How the agent leaves when its Node's IPs change or it is deleted (agent/node_lifecycle.ts). */
function nodeExitHooks(
  api: ApiFetch,
  nodeName: string,
  log: Logger,
  events: Logger,
  exit: (code: number) => void,
  dryRun: boolean,
): NodeGuardHooks {
  return {
    noIPs: () => log.error("Failed to retrieve NodeIPs", undefined, { node: nodeName }),
    exit: (why) => {
      log.info(why.message, why.fields);
      // Best effort and bounded: the exit does not wait on an unreachable API server.
      const posted = dryRun
        ? Promise.resolve()
        : api.usable().then((ok) =>
          ok ? postNodeEvent(api, nodeName, why.event, events) : undefined
        ).catch(() => {});
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise((res) => timer = setTimeout(res, EVENT_TIMEOUT_MS));
      void Promise.race([posted, timeout]).finally(() => {
        clearTimeout(timer);
        exit(EXIT_NODE_CHANGED);
      });
    },
  };
}

/** Loads the kubeconfig and logs where the agent connects. */
function connect(cfg: AgentConfig, log: Logger, nodeName: string) {
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
  return kube;
}
