/**
 * The flags this agent implements (upstream kube-proxy's that apply to nftables mode, plus a few
 * of its own, marked `ours`), and the --help text. The flags upstream has that mean nothing here
 * are in ./upstream.ts.
 *
 * @module
 */
import type { Settings } from "./types.ts";
import {
  cidrList,
  DETECT_MODES,
  detectMode,
  hostPortValidator,
  intIn,
  ipAddress,
  loggingFormat,
  masterURL,
  nodePortList,
  nonEmpty,
  nonNegativeDuration,
  positiveDuration,
  proxyMode,
} from "./values.ts";

/** How a flag's value is written. "version" is a bool that also takes "raw" (as verflag). */
export type ValueKind = "string" | "bool" | "int" | "duration" | "list" | "version";

/** One flag. */
export interface FlagSpec {
  /** Name without the leading dashes. */
  name: string;
  /** Value syntax. */
  kind: ValueKind;
  /** Settings key; absent for --config, which is handled before the others. */
  key?: keyof Settings;
  /** One-line description for --help and docs. */
  help: string;
  /** Shown in --help and docs, e.g. "30s". */
  def?: string;
  /** Accepted form, used in error messages. */
  form?: string;
  /** Converts/validates a raw value; throws Error(reason). */
  convert?: (v: string) => unknown;
  /** Not a kube-proxy flag: this agent's extension. */
  ours?: boolean;
  /** Deprecated upstream: using it warns with this advice, as pflag does. */
  deprecated?: string;
}

/** Every flag with a meaning here, upstream's and ours. Exported for docs and --help. */
export const FLAGS: readonly FlagSpec[] = [
  { name: "config", kind: "string", help: "Path to a KubeProxyConfiguration file." },
  {
    name: "feature-gates",
    kind: "string",
    key: "featureGates",
    form: "comma-separated Name=true|false pairs",
    help: "Feature gates, as upstream's (Name=true|false,...; AllAlpha/AllBeta set every " +
      "alpha/beta gate not set otherwise). Unknown or locked gates are errors. What each gate " +
      "does here: docs/flags.md.",
  },
  {
    name: "kubeconfig",
    kind: "string",
    key: "kubeconfig",
    help: "Path to a kubeconfig file. Default: in-cluster config, else ~/.kube/config.",
  },
  {
    name: "master",
    kind: "string",
    key: "master",
    form: "an http(s) URL",
    convert: masterURL,
    help: "API server URL; overrides the server in the kubeconfig.",
  },
  {
    name: "hostname-override",
    kind: "string",
    key: "hostnameOverride",
    convert: nonEmpty,
    help: "Use this name as the node name instead of the host name.",
  },
  {
    name: "bind-address",
    kind: "string",
    key: "bindAddress",
    def: "0.0.0.0",
    form: "an IP address",
    convert: ipAddress,
    help: "The node's primary IP (0.0.0.0 / :: = detect from the Node object). An IPv6 value " +
      "makes the healthz/metrics defaults IPv6.",
  },
  {
    name: "cluster-cidr",
    kind: "list",
    key: "clusterCIDRs",
    form: "comma-separated CIDRs, at most one per IP family",
    convert: cidrList,
    help: "Pod CIDR range(s) of the cluster, used by --detect-local-mode=ClusterCIDR.",
  },
  {
    name: "detect-local-mode",
    kind: "string",
    key: "detectLocalMode",
    def: "ClusterCIDR",
    form: DETECT_MODES.join("|"),
    convert: detectMode,
    help: "How to detect local pod traffic. ClusterCIDR without --cluster-cidr detects nothing.",
  },
  {
    name: "pod-bridge-interface",
    kind: "string",
    key: "podBridgeInterface",
    convert: nonEmpty,
    help: "Bridge interface name, for --detect-local-mode=BridgeInterface.",
  },
  {
    name: "pod-interface-name-prefix",
    kind: "string",
    key: "podInterfaceNamePrefix",
    convert: nonEmpty,
    help: "Pod interface name prefix, for --detect-local-mode=InterfaceNamePrefix.",
  },
  {
    name: "nodeport-addresses",
    kind: "list",
    key: "nodePortAddresses",
    form: `comma-separated CIDRs and the keywords "primary", "localhost"; or "all" alone`,
    convert: nodePortList,
    help: "Addresses that accept NodePort traffic: CIDRs (matched against this host's " +
      "interface addresses) mixed with 'primary' (the Node's primary IPs) and 'localhost'; " +
      "or 'all' alone (every local address). Empty = primary.",
  },
  {
    name: "masquerade-all",
    kind: "bool",
    key: "masqueradeAll",
    def: "false",
    help: "SNAT all traffic sent via Service cluster IPs.",
  },
  {
    name: "iptables-masquerade-bit",
    kind: "int",
    key: "masqueradeBit",
    def: "14",
    form: "an integer 0..31",
    convert: intIn(0, 31),
    help: "fwmark bit used to mark packets for SNAT.",
  },
  {
    name: "masquerade-bit",
    kind: "int",
    key: "masqueradeBit",
    form: "an integer 0..31",
    convert: intIn(0, 31),
    ours: true,
    help: "Alias of --iptables-masquerade-bit (ours).",
  },
  {
    name: "iptables-sync-period",
    kind: "duration",
    key: "syncPeriodMs",
    def: "30s",
    form: "a Go duration > 0, e.g. 30s",
    convert: positiveDuration,
    help: "Longest interval between rule syncs (upstream's name, which it uses in nftables " +
      "mode too).",
  },
  {
    name: "iptables-min-sync-period",
    kind: "duration",
    key: "minSyncPeriodMs",
    def: "1s",
    form: "a Go duration >= 0, e.g. 1s or 500ms",
    convert: nonNegativeDuration,
    help: "Shortest interval between rule syncs, which batches bursts of changes.",
  },
  {
    name: "sync-period",
    kind: "duration",
    key: "syncPeriodMs",
    form: "a Go duration > 0, e.g. 30s",
    convert: positiveDuration,
    ours: true,
    help: "Alias of --iptables-sync-period (ours).",
  },
  {
    name: "min-sync-period",
    kind: "duration",
    key: "minSyncPeriodMs",
    form: "a Go duration >= 0, e.g. 1s or 500ms",
    convert: nonNegativeDuration,
    ours: true,
    help: "Alias of --iptables-min-sync-period (ours).",
  },
  {
    name: "full-sync-period",
    kind: "duration",
    key: "fullSyncPeriodMs",
    def: "1h",
    form: "a Go duration > 0, e.g. 1h",
    convert: positiveDuration,
    ours: true,
    help:
      "Longest interval between full syncs, which compare the whole ruleset with the kernel (ours; notifications cover the rest).",
  },
  {
    name: "conntrack-reconciler-period",
    kind: "duration",
    key: "conntrackReconcilerPeriodMs",
    def: "30s",
    form: "a Go duration > 0, e.g. 30s",
    convert: positiveDuration,
    ours: true,
    help: "Interval of the conntrack reconciler (ours; upstream reconciles after every sync, " +
      "at least once per sync period).",
  },
  {
    name: "healthz-bind-address",
    kind: "string",
    key: "healthzBindAddress",
    def: "0.0.0.0:10256",
    form: `"IP:port", "[IPv6]:port", a bare IP (port 10256) or "" to disable`,
    convert: hostPortValidator(10256),
    help: "Address of the /healthz and /livez server. Empty disables it.",
  },
  {
    name: "metrics-bind-address",
    kind: "string",
    key: "metricsBindAddress",
    def: "127.0.0.1:10249",
    form: `"IP:port", "[IPv6]:port", a bare IP (port 10249) or "" to disable`,
    convert: hostPortValidator(10249),
    help: "Address of the server of /metrics, /healthz, /proxyMode and /configz. Empty " +
      "disables it.",
  },
  {
    name: "healthz-port",
    kind: "int",
    key: "healthzPort",
    form: "an integer 0..65535",
    convert: intIn(0, 65535),
    deprecated: "use --healthz-bind-address instead",
    help: "Port of the healthz server; 0 disables it. Deprecated upstream; ignored with --config.",
  },
  {
    name: "metrics-port",
    kind: "int",
    key: "metricsPort",
    form: "an integer 0..65535",
    convert: intIn(0, 65535),
    deprecated: "use --metrics-bind-address instead",
    help: "Port of the metrics server; 0 disables it. Deprecated upstream; ignored with --config.",
  },
  {
    name: "conntrack-max-per-core",
    kind: "int",
    key: "ctMaxPerCore",
    def: "32768",
    form: "an integer >= 0",
    convert: intIn(0, 2 ** 31 - 1),
    help: "Conntrack entries per CPU core; the total is capped at 1,048,576 and a larger " +
      "nf_conntrack_max is never lowered (0 = leave nf_conntrack_max alone).",
  },
  {
    name: "conntrack-min",
    kind: "int",
    key: "ctMin",
    def: "131072",
    form: "an integer >= 0",
    convert: intIn(0, 2 ** 31 - 1),
    help: "Minimum nf_conntrack_max, regardless of --conntrack-max-per-core.",
  },
  {
    name: "conntrack-tcp-timeout-established",
    kind: "duration",
    key: "ctTcpEstablishedMs",
    def: "24h",
    form: "a Go duration >= 0",
    convert: nonNegativeDuration,
    help: "Idle timeout of established TCP flows (0 = leave as is).",
  },
  {
    name: "conntrack-tcp-timeout-close-wait",
    kind: "duration",
    key: "ctTcpCloseWaitMs",
    def: "1h",
    form: "a Go duration >= 0",
    convert: nonNegativeDuration,
    help: "Timeout of TCP flows in CLOSE_WAIT (0 = leave as is).",
  },
  {
    name: "conntrack-tcp-be-liberal",
    kind: "bool",
    key: "ctTcpBeLiberal",
    def: "false",
    help: "Set nf_conntrack_tcp_be_liberal=1 (accept out-of-window TCP packets).",
  },
  {
    name: "conntrack-udp-timeout",
    kind: "duration",
    key: "ctUdpMs",
    def: "0s",
    form: "a Go duration >= 0",
    convert: nonNegativeDuration,
    help: "Idle timeout of UNREPLIED UDP flows (0 = leave as is).",
  },
  {
    name: "conntrack-udp-timeout-stream",
    kind: "duration",
    key: "ctUdpStreamMs",
    def: "0s",
    form: "a Go duration >= 0",
    convert: nonNegativeDuration,
    help: "Idle timeout of ASSURED UDP flows (0 = leave as is).",
  },
  {
    name: "cleanup",
    kind: "bool",
    key: "cleanup",
    def: "false",
    help: "Delete the kube-proxy nftables tables and exit.",
  },
  {
    name: "init-only",
    kind: "bool",
    key: "initOnly",
    def: "false",
    help: "Do the privileged node setup (conntrack sysctls) and exit, as upstream's, so a " +
      "DaemonSet can run it in an init container and the proxy itself without privileged.",
  },
  {
    name: "write-config-to",
    kind: "string",
    key: "writeConfigTo",
    convert: nonEmpty,
    help: "Write the effective configuration (a KubeProxyConfiguration) to this file and exit.",
  },
  {
    name: "v",
    kind: "int",
    key: "verbosity",
    def: "0",
    form: "an integer 0..10",
    convert: intIn(0, 10),
    help: "Log verbosity (also -v=N).",
  },
  {
    name: "logging-format",
    kind: "string",
    key: "loggingFormat",
    def: "text",
    form: "text|json",
    convert: loggingFormat,
    help: "Log line format.",
  },
  {
    name: "log-text-split-stream",
    kind: "bool",
    key: "logTextSplitStream",
    def: "false",
    help: "In text format, write info lines to stdout and the rest to stderr (default: all to " +
      "stderr). Alpha upstream, behind the LoggingAlphaOptions gate; here always available.",
  },
  {
    name: "log-json-split-stream",
    kind: "bool",
    key: "logJsonSplitStream",
    def: "false",
    help: "The same for --logging-format=json.",
  },
  {
    name: "logtostderr",
    kind: "bool",
    key: "logToStderr",
    def: "true",
    help: "klog: log to stderr. With --logtostderr=false, lines go to --log-file.",
  },
  {
    name: "alsologtostderr",
    kind: "bool",
    key: "alsoLogToStderr",
    def: "false",
    help: "klog: with --logtostderr=false, also log to stderr.",
  },
  {
    name: "log-file",
    kind: "string",
    key: "logFile",
    convert: nonEmpty,
    help: "klog: with --logtostderr=false, append log lines to this file (e.g. /dev/stdout).",
  },
  {
    name: "dry-run",
    kind: "bool",
    key: "dryRun",
    def: "false",
    ours: true,
    help: "Print the nftables transactions each sync would run; touch nothing (ours).",
  },
  {
    name: "cleanup-iptables-nft",
    kind: "bool",
    key: "cleanupIptablesNft",
    def: "false",
    ours: true,
    help: "After the first sync, remove the rules kube-proxy's iptables mode left in the " +
      "iptables-nft tables (KUBE-* chains and their jumps; nothing else) through libnftables " +
      "(ours; docs/migration.md).",
  },
  {
    name: "version",
    kind: "version",
    key: "version",
    help: "Print the version and exit (--version=raw: the detailed form; --version=vX.Y.Z " +
      "upstream sets the reported version, here it only warns).",
  },
  {
    name: "lib-dir",
    kind: "string",
    key: "libDir",
    convert: nonEmpty,
    ours: true,
    help: "Directory of libnftables.so.1 and libnetfilter_conntrack.so.3 (ours). Default: " +
      "the system library path.",
  },
  {
    name: "proxy-mode",
    kind: "string",
    key: "mode",
    def: "nftables",
    form: `"nftables"`,
    convert: proxyMode,
    help: `Proxy mode; only "nftables" is accepted.`,
  },
  { name: "help", kind: "bool", key: "help", help: "Print this help and exit." },
];

/** The flags by name. */
export const FLAG_BY_NAME: ReadonlyMap<string, FlagSpec> = new Map(FLAGS.map((f) => [f.name, f]));

/** Renders the --help text. */
export function usage(): string {
  const lines = [
    "Usage: kube-nft-proxy [flags]",
    "",
    "A Kubernetes service proxy (kube-proxy nftables mode drop-in).",
    "Flags take --name=value or --name value; booleans take --name or --name=false.",
    "kube-proxy's other flags are accepted and ignored with a warning (docs/flags.md).",
    "",
  ];
  for (const f of FLAGS) {
    const arg = f.kind === "bool" || f.kind === "version" ? "" : ` ${f.kind}`;
    const def = f.def !== undefined ? ` (default ${JSON.stringify(f.def)})` : "";
    lines.push(`  --${f.name}${arg}`, `      ${f.help}${def}`);
  }
  return lines.join("\n") + "\n";
}
