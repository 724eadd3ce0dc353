/**
 * The agent's configuration types: {@link AgentConfig} (what the rest of the agent reads) and the
 * {@link Settings} both sources (command line, config file) fill in before defaults apply.
 *
 * @module
 */

import type { ProxyGates } from "./feature_gates.ts";

/** How the proxier decides that traffic comes from a local pod. */
export type DetectLocalMode =
  | "ClusterCIDR"
  | "NodeCIDR"
  | "BridgeInterface"
  | "InterfaceNamePrefix";

/** Log line format. */
export type LoggingFormat = "text" | "json";

/** Conntrack sysctl settings (0 / null mean "leave the kernel value alone"). */
export interface ConntrackConfig {
  /** Max conntrack entries per CPU core (nf_conntrack_max = this x cores). 0 = leave as is. */
  maxPerCore: number;
  /** Floor for nf_conntrack_max, applied when maxPerCore x cores is smaller. */
  min: number;
  /** nf_conntrack_tcp_timeout_established in ms; 0 = leave as is. */
  tcpEstablishedTimeoutMs: number;
  /** nf_conntrack_tcp_timeout_close_wait in ms; 0 = leave as is. */
  tcpCloseWaitTimeoutMs: number;
  /** Set nf_conntrack_tcp_be_liberal=1. */
  tcpBeLiberal: boolean;
  /** nf_conntrack_udp_timeout in ms; 0 = leave as is. */
  udpTimeoutMs: number;
  /** nf_conntrack_udp_timeout_stream in ms; 0 = leave as is. */
  udpStreamTimeoutMs: number;
}

/**
 * Where a server listens, in v1alpha2's form: every local IP inside `cidrs` (a /0 means the
 * family's wildcard address), on `port`.
 */
export interface BindCIDRs {
  /** CIDRs holding the node IPs to listen on. */
  cidrs: string[];
  /** TCP port. */
  port: number;
}

/** Everything the agent needs from its command line and config file. */
export interface AgentConfig {
  /** --config: path of the KubeProxyConfiguration file, if any. */
  configFile?: string;
  /** apiVersion of the --config file, when one was read. */
  configApiVersion?: string;
  /** --kubeconfig / clientConnection.kubeconfig. */
  kubeconfig?: string;
  /** --master: API server URL, overrides the kubeconfig's server. */
  master?: string;
  /** --hostname-override / hostnameOverride: this node's name, if not the host name. */
  hostnameOverride?: string;
  /** --bind-address / bindAddress: the node's primary IP hint; "0.0.0.0" = unset. */
  bindAddress: string;
  /**
   * The node IPs that override the Node object's, one per family: [bindAddress] from v1alpha1
   * and flags, v1alpha2's nodeIPOverride list. Unspecified addresses (0.0.0.0, ::) mean none.
   */
  nodeIPOverride: string[];
  /** --cluster-cidr / clusterCIDR: pod CIDRs (at most one per family). */
  clusterCIDRs: string[];
  /** --detect-local-mode / detectLocalMode. */
  detectLocalMode: DetectLocalMode;
  /** --pod-bridge-interface / detectLocal.bridgeInterface. */
  podBridgeInterface?: string;
  /** --pod-interface-name-prefix / detectLocal.interfaceNamePrefix. */
  podInterfaceNamePrefix?: string;
  /** --nodeport-addresses / nodePortAddresses: CIDRs and "primary", "localhost", or "all" alone; [] = primary. */
  nodePortAddresses: string[];
  /** --masquerade-all / nftables.masqueradeAll. */
  masqueradeAll: boolean;
  /** --iptables-masquerade-bit / nftables.masqueradeBit: fwmark bit 0..31. */
  masqueradeBit: number;
  /** --iptables-sync-period / syncPeriod, in ms. */
  syncPeriodMs: number;
  /** --iptables-min-sync-period / minSyncPeriod, in ms. */
  minSyncPeriodMs: number;
  /** --full-sync-period: forced full resync interval, in ms (ours). */
  fullSyncPeriodMs: number;
  /** --conntrack-reconciler-period: conntrack reconciler interval, in ms (ours). */
  conntrackReconcilerPeriodMs: number;
  /** --healthz-bind-address / healthzBindAddress: "host:port", or "" to disable. */
  healthzBindAddress: string;
  /** v1alpha2 healthzBindAddresses + healthzBindPort; when set, used instead of healthzBindAddress. */
  healthzBindCIDRs?: BindCIDRs;
  /** --metrics-bind-address / metricsBindAddress: "host:port", or "" to disable. */
  metricsBindAddress: string;
  /** v1alpha2 metricsBindAddresses + metricsBindPort; when set, used instead of metricsBindAddress. */
  metricsBindCIDRs?: BindCIDRs;
  /** Conntrack sysctls. */
  conntrack: ConntrackConfig;
  /** --cleanup: remove our tables and exit. */
  cleanup: boolean;
  /** --cleanup-iptables-nft: after the first sync, remove kube-proxy's iptables-nft rules (ours). */
  cleanupIptablesNft: boolean;
  /** --init-only: the privileged node setup (conntrack sysctls), then exit. */
  initOnly: boolean;
  /** --write-config-to: write the effective configuration there and exit. */
  writeConfigTo?: string;
  /** --v / logging.verbosity. */
  verbosity: number;
  /** --logging-format / logging.format. */
  loggingFormat: LoggingFormat;
  /**
   * --log-text-split-stream / --log-json-split-stream (for the format in use): info lines to
   * stdout, the rest to stderr. Off: every line to stderr, klog's default.
   */
  logSplitStream: boolean;
  /**
   * klog's --log-file when --logtostderr=false: lines are appended there (also to stderr with
   * --alsologtostderr); undefined: the standard streams.
   */
  logFile?: string;
  /** klog's --alsologtostderr, with {@link logFile}. */
  alsoLogToStderr: boolean;
  /** --dry-run: print each sync's transactions, touch nothing (ours). */
  dryRun: boolean;
  /** --version: print the version and exit ("raw": the detailed form). */
  version: boolean | "raw";
  /** --help: print usage and exit. */
  help: boolean;
  /** --lib-dir: directory holding libnftables.so.1 / libnetfilter_conntrack.so.3 (ours). */
  libDir?: string;
  /** --proxy-mode / mode: always "nftables". */
  mode: "nftables";
  /** --feature-gates / featureGates as given (file, then the command line on top). */
  featureGates: Record<string, boolean>;
  /** The gates this agent reads, resolved (AllAlpha/AllBeta, defaults). */
  gates: ProxyGates;
  /** The flags given on the command line, by name, with their raw values (for /flagz). */
  flagsGiven: Record<string, string>;
  /** Non-fatal findings (unknown config fields, ignored settings) for the caller to log. */
  warnings: string[];
}

/** Bad command line or config file; the message names the flag or field and the accepted form. */
export class UsageError extends Error {
  /** Creates a usage error. */
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * Every value either source can set, before defaults and validation. Shared by the flag parser,
 * the config file readers and the assembly step; not part of the agent's API.
 */
export interface Settings {
  /** --kubeconfig / clientConnection.kubeconfig. See {@link AgentConfig.kubeconfig}. */
  kubeconfig?: string;
  /** --master. See {@link AgentConfig.master}. */
  master?: string;
  /** --hostname-override / hostnameOverride. See {@link AgentConfig.hostnameOverride}. */
  hostnameOverride?: string;
  /** --bind-address / bindAddress. See {@link AgentConfig.bindAddress}. */
  bindAddress?: string;
  /** v1alpha2 nodeIPOverride. */
  nodeIPOverride?: string[];
  /** --cluster-cidr / clusterCIDR. See {@link AgentConfig.clusterCIDRs}. */
  clusterCIDRs?: string[];
  /** --detect-local-mode / detectLocalMode. See {@link AgentConfig.detectLocalMode}. */
  detectLocalMode?: DetectLocalMode;
  /** --pod-bridge-interface / detectLocal.bridgeInterface. See {@link AgentConfig.podBridgeInterface}. */
  podBridgeInterface?: string;
  /** --pod-interface-name-prefix / detectLocal.interfaceNamePrefix. See {@link AgentConfig.podInterfaceNamePrefix}. */
  podInterfaceNamePrefix?: string;
  /** --nodeport-addresses / nodePortAddresses. See {@link AgentConfig.nodePortAddresses}. */
  nodePortAddresses?: string[];
  /** --masquerade-all / nftables.masqueradeAll. See {@link AgentConfig.masqueradeAll}. */
  masqueradeAll?: boolean;
  /** --iptables-masquerade-bit / nftables.masqueradeBit. See {@link AgentConfig.masqueradeBit}. */
  masqueradeBit?: number;
  /** --iptables-sync-period / syncPeriod, in ms. See {@link AgentConfig.syncPeriodMs}. */
  syncPeriodMs?: number;
  /** --iptables-min-sync-period / minSyncPeriod, in ms. See {@link AgentConfig.minSyncPeriodMs}. */
  minSyncPeriodMs?: number;
  /** --full-sync-period. See {@link AgentConfig.fullSyncPeriodMs}. */
  fullSyncPeriodMs?: number;
  /** --conntrack-reconciler-period. See {@link AgentConfig.conntrackReconcilerPeriodMs}. */
  conntrackReconcilerPeriodMs?: number;
  /** --healthz-bind-address / healthzBindAddress. See {@link AgentConfig.healthzBindAddress}. */
  healthzBindAddress?: string;
  /** v1alpha2 healthzBindAddresses. */
  healthzBindCIDRs?: string[];
  /** v1alpha2 healthzBindPort. */
  healthzBindPort?: number;
  /** Deprecated --healthz-port: the port of the healthz address; 0 disables the server. */
  healthzPort?: number;
  /** --metrics-bind-address / metricsBindAddress. See {@link AgentConfig.metricsBindAddress}. */
  metricsBindAddress?: string;
  /** v1alpha2 metricsBindAddresses. */
  metricsBindCIDRs?: string[];
  /** v1alpha2 metricsBindPort. */
  metricsBindPort?: number;
  /** Deprecated --metrics-port: the port of the metrics address; 0 disables the server. */
  metricsPort?: number;
  /** conntrack.maxPerCore. */
  ctMaxPerCore?: number;
  /** conntrack.min. */
  ctMin?: number;
  /** conntrack.tcpEstablishedTimeout, ms. */
  ctTcpEstablishedMs?: number;
  /** conntrack.tcpCloseWaitTimeout, ms. */
  ctTcpCloseWaitMs?: number;
  /** conntrack.tcpBeLiberal. */
  ctTcpBeLiberal?: boolean;
  /** conntrack.udpTimeout, ms. */
  ctUdpMs?: number;
  /** conntrack.udpStreamTimeout, ms. */
  ctUdpStreamMs?: number;
  /** --cleanup. See {@link AgentConfig.cleanup}. */
  cleanup?: boolean;
  /** --cleanup-iptables-nft. See {@link AgentConfig.cleanupIptablesNft}. */
  cleanupIptablesNft?: boolean;
  /** --init-only. See {@link AgentConfig.initOnly}. */
  initOnly?: boolean;
  /** --write-config-to. See {@link AgentConfig.writeConfigTo}. */
  writeConfigTo?: string;
  /** --v / logging.verbosity. See {@link AgentConfig.verbosity}. */
  verbosity?: number;
  /** --logging-format / logging.format. See {@link AgentConfig.loggingFormat}. */
  loggingFormat?: LoggingFormat;
  /** logging.options.text.splitStream. */
  logTextSplitStream?: boolean;
  /** logging.options.json.splitStream. */
  logJsonSplitStream?: boolean;
  /** klog --logtostderr (default true). */
  logToStderr?: boolean;
  /** klog --alsologtostderr. */
  alsoLogToStderr?: boolean;
  /** klog --log-file. */
  logFile?: string;
  /** --dry-run. See {@link AgentConfig.dryRun}. */
  dryRun?: boolean;
  /** --version. See {@link AgentConfig.version}. */
  version?: boolean | "raw";
  /** --help. See {@link AgentConfig.help}. */
  help?: boolean;
  /** --lib-dir. See {@link AgentConfig.libDir}. */
  libDir?: string;
  /** --proxy-mode / mode. See {@link AgentConfig.mode}. */
  mode?: "nftables";
  /** --feature-gates / featureGates as given (file, then the command line on top). See {@link AgentConfig.featureGates}. */
  featureGates?: Record<string, boolean>;
}
