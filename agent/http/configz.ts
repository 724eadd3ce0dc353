/**
 * The effective configuration, in the two shapes upstream kube-proxy shows it:
 * - {@link effectiveConfiguration}: a v1alpha1 `KubeProxyConfiguration`, what `--write-config-to`
 *   writes (upstream encodes v1alpha1 there too) and `--config` reads back;
 * - {@link configzBody}: `/configz` on the metrics port. Upstream registers its internal config
 *   object with component-base's configz, which marshals it with Go's field names (the internal
 *   type has no JSON tags, except the logging part's), under `"kubeproxy.config.k8s.io"`.
 *
 * @module
 */
import { formatGoDuration } from "../../net/duration.ts";
import type { AgentConfig } from "../flags.ts";
import { AGENT_RELEASE, KUBE_PROXY_COMPATIBLE } from "../flags/version.ts";

const d = formatGoDuration;

function loggingOptions(cfg: AgentConfig): Record<string, unknown> {
  const split = (format: string) =>
    cfg.logSplitStream && cfg.loggingFormat === format ? { splitStream: true } : {};
  return {
    text: { ...split("text"), infoBufferSize: "0" },
    json: { ...split("json"), infoBufferSize: "0" },
  };
}

/** `cfg` in the shape of a v1alpha1 KubeProxyConfiguration. */
export function effectiveConfiguration(cfg: AgentConfig): Record<string, unknown> {
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
    featureGates: { ...cfg.featureGates },
    healthzBindAddress: cfg.healthzBindAddress,
    hostnameOverride: cfg.hostnameOverride ?? "",
    logging: {
      format: cfg.loggingFormat,
      verbosity: cfg.verbosity,
      options: loggingOptions(cfg),
    },
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

/**
 * The body of `/configz`: `cfg` as upstream's internal KubeProxyConfiguration marshals. Settings
 * that do nothing here show what the agent really does (JSON, no client-side rate limit, no
 * OOM score change of its own, no log buffering), not upstream's defaults. A second section,
 * `kube-nft-proxy`, says which release this is and which kube-proxy release it behaves as.
 */
export function configzBody(cfg: AgentConfig): Record<string, unknown> {
  const ct = cfg.conntrack;
  return {
    "kubeproxy.config.k8s.io": {
      Linux: {
        Conntrack: {
          MaxPerCore: ct.maxPerCore,
          Min: ct.min,
          TCPEstablishedTimeout: d(ct.tcpEstablishedTimeoutMs),
          TCPCloseWaitTimeout: d(ct.tcpCloseWaitTimeoutMs),
          TCPBeLiberal: ct.tcpBeLiberal,
          UDPTimeout: d(ct.udpTimeoutMs),
          UDPStreamTimeout: d(ct.udpStreamTimeoutMs),
        },
        MasqueradeAll: cfg.masqueradeAll,
        OOMScoreAdj: null,
      },
      Windows: { RunAsService: false },
      FeatureGates: { ...cfg.featureGates },
      ClientConnection: {
        Kubeconfig: cfg.kubeconfig ?? "",
        AcceptContentTypes: "",
        ContentType: "application/json",
        QPS: 0,
        Burst: 0,
      },
      Logging: {
        format: cfg.loggingFormat,
        flushFrequency: "0s",
        verbosity: cfg.verbosity,
        options: loggingOptions(cfg),
      },
      HostnameOverride: cfg.hostnameOverride ?? "",
      BindAddress: cfg.bindAddress,
      HealthzBindAddress: cfg.healthzBindAddress,
      MetricsBindAddress: cfg.metricsBindAddress,
      BindAddressHardFail: true,
      EnableProfiling: false,
      ShowHiddenMetricsForVersion: "",
      Mode: cfg.mode,
      IPTables: { MasqueradeBit: cfg.masqueradeBit, LocalhostNodePorts: false },
      IPVS: {
        Scheduler: "",
        ExcludeCIDRs: null,
        StrictARP: false,
        TCPTimeout: "0s",
        TCPFinTimeout: "0s",
        UDPTimeout: "0s",
      },
      Winkernel: {
        NetworkName: "",
        SourceVip: "",
        EnableDSR: false,
        RootHnsEndpointName: "",
        ForwardHealthCheckVip: false,
      },
      NFTables: { MasqueradeBit: cfg.masqueradeBit },
      DetectLocalMode: cfg.detectLocalMode,
      DetectLocal: {
        BridgeInterface: cfg.podBridgeInterface ?? "",
        ClusterCIDRs: cfg.clusterCIDRs,
        InterfaceNamePrefix: cfg.podInterfaceNamePrefix ?? "",
      },
      NodePortAddresses: cfg.nodePortAddresses.length ? cfg.nodePortAddresses : null,
      SyncPeriod: d(cfg.syncPeriodMs),
      MinSyncPeriod: d(cfg.minSyncPeriodMs),
      ConfigSyncPeriod: "0s",
    },
    "kube-nft-proxy": { version: AGENT_RELEASE, kubeProxyCompatible: KUBE_PROXY_COMPATIBLE },
  };
}
