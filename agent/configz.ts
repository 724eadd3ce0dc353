/**
 * The effective configuration as a `KubeProxyConfiguration` (kubeproxy.config.k8s.io/v1alpha1),
 * for `/configz` on the metrics port, as upstream kube-proxy serves it: what the agent runs with
 * after flags, config file and defaults, in the file's own field names and Go duration strings.
 *
 * @module
 */
import { type AgentConfig, formatGoDuration } from "./flags.ts";

/** `cfg` in the shape of a v1alpha1 KubeProxyConfiguration. */
export function effectiveConfiguration(cfg: AgentConfig): Record<string, unknown> {
  const d = formatGoDuration;
  return {
    apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
    kind: "KubeProxyConfiguration",
    bindAddress: cfg.bindAddress,
    clientConnection: { kubeconfig: cfg.kubeconfig ?? "" },
    clusterCIDR: cfg.clusterCIDRs.join(","),
    conntrack: {
      maxPerCore: cfg.conntrack.maxPerCore,
      min: cfg.conntrack.min,
      tcpEstablishedTimeout: d(cfg.conntrack.tcpEstablishedTimeoutMs),
      tcpCloseWaitTimeout: d(cfg.conntrack.tcpCloseWaitTimeoutMs),
      tcpBeLiberal: cfg.conntrack.tcpBeLiberal,
      udpTimeout: d(cfg.conntrack.udpTimeoutMs),
      udpStreamTimeout: d(cfg.conntrack.udpStreamTimeoutMs),
    },
    detectLocalMode: cfg.detectLocalMode,
    detectLocal: {
      bridgeInterface: cfg.podBridgeInterface ?? "",
      interfaceNamePrefix: cfg.podInterfaceNamePrefix ?? "",
    },
    healthzBindAddress: cfg.healthzBindAddress,
    hostnameOverride: cfg.hostnameOverride ?? "",
    logging: { format: cfg.loggingFormat, verbosity: cfg.verbosity },
    metricsBindAddress: cfg.metricsBindAddress,
    mode: cfg.mode,
    nftables: {
      masqueradeAll: cfg.masqueradeAll,
      masqueradeBit: cfg.masqueradeBit,
      syncPeriod: d(cfg.syncPeriodMs),
      minSyncPeriod: d(cfg.minSyncPeriodMs),
    },
    nodePortAddresses: cfg.nodePortAddresses,
    syncPeriod: d(cfg.syncPeriodMs),
    minSyncPeriod: d(cfg.minSyncPeriodMs),
  };
}
