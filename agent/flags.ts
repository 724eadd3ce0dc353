/**
 * Command-line flags and KubeProxyConfiguration file -> one typed {@link AgentConfig}.
 *
 * Precedence: built-in defaults < `--config` file < flags given on the command line.
 * (Upstream kube-proxy ignores most flags when --config is given; we let flags win so a
 * single setting can be overridden without editing the file.)
 * @module
 */
import { parse as parseYaml } from "yaml";
import { didYouMean, IGNORED_FLAGS } from "./upstream_flags.ts";

/** The agent's version string, printed by `--version`. */
export const AGENT_VERSION = "kube-nft-proxy v0.1.0";

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

/** Everything the agent needs from its command line and config file. */
export interface AgentConfig {
  /** --config: path of the KubeProxyConfiguration file, if any. */
  configFile?: string;
  /** --kubeconfig / clientConnection.kubeconfig. */
  kubeconfig?: string;
  /** --master: API server URL, overrides the kubeconfig's server. */
  master?: string;
  /** --hostname-override / hostnameOverride: this node's name, if not the host name. */
  hostnameOverride?: string;
  /** --bind-address / bindAddress: the node's primary IP hint; "0.0.0.0" = unset. */
  bindAddress: string;
  /** --cluster-cidr / clusterCIDR: pod CIDRs (at most one per family). */
  clusterCIDRs: string[];
  /** --detect-local-mode / detectLocalMode. */
  detectLocalMode: DetectLocalMode;
  /** --pod-bridge-interface / detectLocal.bridgeInterface. */
  podBridgeInterface?: string;
  /** --pod-interface-name-prefix / detectLocal.interfaceNamePrefix. */
  podInterfaceNamePrefix?: string;
  /** --nodeport-addresses / nodePortAddresses: CIDRs, or ["primary"]; [] = primary (nftables mode default). */
  nodePortAddresses: string[];
  /** --masquerade-all / nftables.masqueradeAll. */
  masqueradeAll: boolean;
  /** --iptables-masquerade-bit / nftables.masqueradeBit: fwmark bit 0..31. */
  masqueradeBit: number;
  /** --sync-period / nftables.syncPeriod, in ms. */
  syncPeriodMs: number;
  /** --min-sync-period / nftables.minSyncPeriod, in ms. */
  minSyncPeriodMs: number;
  /** --full-sync-period: forced full resync interval, in ms (ours). */
  fullSyncPeriodMs: number;
  /** --conntrack-reconciler-period: conntrack reconciler interval, in ms (ours). */
  conntrackReconcilerPeriodMs: number;
  /** --healthz-bind-address / healthzBindAddress: "host:port", or "" to disable. */
  healthzBindAddress: string;
  /** --metrics-bind-address / metricsBindAddress: "host:port", or "" to disable. */
  metricsBindAddress: string;
  /** Conntrack sysctls. */
  conntrack: ConntrackConfig;
  /** --cleanup: remove our tables and exit. */
  cleanup: boolean;
  /** --init-only: the privileged node setup (conntrack sysctls), then exit. */
  initOnly: boolean;
  /** --write-config-to: write the effective configuration there and exit. */
  writeConfigTo?: string;
  /** --v / logging.verbosity. */
  verbosity: number;
  /** --logging-format / logging.format. */
  loggingFormat: LoggingFormat;
  /** --dry-run: print each sync's transactions, touch nothing (ours). */
  dryRun: boolean;
  /** --version: print the version and exit. */
  version: boolean;
  /** --help: print usage and exit. */
  help: boolean;
  /** --lib-dir: directory holding libnftables.so.1 / libnetfilter_conntrack.so.3 (ours). */
  libDir?: string;
  /** --proxy-mode / mode: always "nftables". */
  mode: "nftables";
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

// ---------------------------------------------------------------------------------------------
// Value parsers (pure)

const DURATION_UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Parses a Go duration ("1s", "500ms", "1h30m", "1.5h", "0") into milliseconds.
 * Throws a plain Error describing the accepted syntax.
 */
export function parseGoDuration(text: string): number {
  const s = text.trim();
  const bad = () =>
    new Error(`invalid duration "${text}": use Go syntax such as 500ms, 30s, 1m30s or 1h`);
  if (s === "0" || s === "+0" || s === "-0") return 0;
  const m = /^([+-]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)$/.exec(s);
  if (!m) throw bad();
  let total = 0;
  for (const part of m[2].matchAll(/(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g)) {
    total += Number(part[1]) * DURATION_UNITS[part[2]];
  }
  return m[1] === "-" ? -total : total;
}

/** Formats milliseconds as a Go-style duration ("1h30m0s", "500ms"), for docs and logs. */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return "0s";
  if (Math.abs(ms) < 1000) return `${ms}ms`;
  const sign = ms < 0 ? "-" : "";
  let rest = Math.abs(ms) / 1000;
  const h = Math.floor(rest / 3600);
  rest -= h * 3600;
  const m = Math.floor(rest / 60);
  rest -= m * 60;
  const sec = Number(rest.toFixed(3));
  return sign + (h ? `${h}h${m}m${sec}s` : m ? `${m}m${sec}s` : `${sec}s`);
}

/** True if `s` is a literal IPv4 address. */
export function isIPv4(s: string): boolean {
  const parts = s.split(".");
  return parts.length === 4 &&
    parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255 && !(p.length > 1 && p[0] === "0"));
}

/** True if `s` is a literal IPv6 address (no zone). */
export function isIPv6(s: string): boolean {
  if (!s.includes(":") || !/^[0-9a-fA-F:.]+$/.test(s)) return false;
  let head = s;
  let extra = 0;
  const lastColon = s.lastIndexOf(":");
  const tail = s.slice(lastColon + 1);
  if (tail.includes(".")) {
    if (!isIPv4(tail)) return false;
    head = s.slice(0, lastColon + 1) + "0"; // stand-in group for the 2 IPv4 groups
    extra = 1;
  }
  const dbl = head.split("::");
  if (dbl.length > 2) return false;
  const groups = (x: string) => (x === "" ? [] : x.split(":"));
  const all = dbl.flatMap(groups);
  if (!all.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return false;
  const n = all.length + extra;
  return dbl.length === 2 ? n <= 7 : n === 8;
}

/** True if `s` is an IPv4 or IPv6 CIDR ("10.0.0.0/8", "fd00::/64"). */
export function isCIDR(s: string): boolean {
  const i = s.indexOf("/");
  if (i < 0) return false;
  const ip = s.slice(0, i);
  const bits = s.slice(i + 1);
  if (!/^\d{1,3}$/.test(bits)) return false;
  if (isIPv4(ip)) return Number(bits) <= 32;
  if (isIPv6(ip)) return Number(bits) <= 128;
  return false;
}

/** Checks "host:port" / "[v6]:port" / bare IP (port then comes from `defaultPort`). */
export function normalizeHostPort(value: string, defaultPort: number): string {
  if (value === "") return "";
  let host: string;
  let port: string | undefined;
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(value);
  if (v6) {
    host = v6[1];
    port = v6[2];
    if (!isIPv6(host)) throw new Error(`"${host}" is not an IPv6 address`);
  } else if (isIPv6(value)) {
    host = value;
  } else {
    const i = value.lastIndexOf(":");
    host = i < 0 ? value : value.slice(0, i);
    port = i < 0 ? undefined : value.slice(i + 1);
    if (!isIPv4(host)) throw new Error(`"${host}" is not an IP address`);
  }
  const p = port === undefined ? defaultPort : Number(port);
  if (port !== undefined && !/^\d+$/.test(port) || !Number.isInteger(p) || p < 0 || p > 65535) {
    throw new Error(`port "${port}" is not a number in 0..65535`);
  }
  return host.includes(":") ? `[${host}]:${p}` : `${host}:${p}`;
}

/** Splits "host:port" produced by {@link normalizeHostPort} into its parts. */
export function splitHostPort(addr: string): { hostname: string; port: number } {
  const i = addr.lastIndexOf(":");
  const host = addr.slice(0, i).replace(/^\[|\]$/g, "");
  return { hostname: host, port: Number(addr.slice(i + 1)) };
}

// ---------------------------------------------------------------------------------------------
// Settings: every value either source can set, before defaults and validation.

interface Settings {
  kubeconfig?: string;
  master?: string;
  hostnameOverride?: string;
  bindAddress?: string;
  clusterCIDRs?: string[];
  detectLocalMode?: DetectLocalMode;
  podBridgeInterface?: string;
  podInterfaceNamePrefix?: string;
  nodePortAddresses?: string[];
  masqueradeAll?: boolean;
  masqueradeBit?: number;
  syncPeriodMs?: number;
  minSyncPeriodMs?: number;
  fullSyncPeriodMs?: number;
  conntrackReconcilerPeriodMs?: number;
  healthzBindAddress?: string;
  metricsBindAddress?: string;
  ctMaxPerCore?: number;
  ctMin?: number;
  ctTcpEstablishedMs?: number;
  ctTcpCloseWaitMs?: number;
  ctTcpBeLiberal?: boolean;
  ctUdpMs?: number;
  ctUdpStreamMs?: number;
  cleanup?: boolean;
  initOnly?: boolean;
  writeConfigTo?: string;
  verbosity?: number;
  loggingFormat?: LoggingFormat;
  dryRun?: boolean;
  version?: boolean;
  help?: boolean;
  libDir?: string;
  mode?: "nftables";
}

type ValueKind = "string" | "bool" | "int" | "duration" | "list";

interface FlagSpec {
  name: string;
  kind: ValueKind;
  /** Settings key; absent for --config, which is handled before the others. */
  key?: keyof Settings;
  help: string;
  /** Shown in --help and docs, e.g. "30s". */
  def?: string;
  /** Accepted form, used in error messages. */
  form?: string;
  /** Converts/validates a raw value; throws Error(reason). */
  convert?: (v: string) => unknown;
}

const DETECT_MODES: readonly DetectLocalMode[] = [
  "ClusterCIDR",
  "NodeCIDR",
  "BridgeInterface",
  "InterfaceNamePrefix",
];

function intIn(lo: number, hi: number) {
  return (v: string) => {
    if (!/^[+-]?\d+$/.test(v.trim())) throw new Error(`"${v}" is not an integer`);
    const n = Number(v);
    if (n < lo || n > hi) throw new Error(`${n} is outside ${lo}..${hi}`);
    return n;
  };
}

function nonNegativeDuration(v: string): number {
  const ms = parseGoDuration(v);
  if (ms < 0) throw new Error(`duration "${v}" must not be negative`);
  return ms;
}

function positiveDuration(v: string): number {
  const ms = parseGoDuration(v);
  if (ms <= 0) throw new Error(`duration "${v}" must be greater than 0`);
  return ms;
}

function cidrList(v: string): string[] {
  const items = v.split(",").map((s) => s.trim()).filter((s) => s !== "");
  for (const c of items) if (!isCIDR(c)) throw new Error(`"${c}" is not a CIDR`);
  return items;
}

function nodePortList(v: string): string[] {
  const items = v.split(",").map((s) => s.trim()).filter((s) => s !== "");
  return checkNodePortAddresses(items);
}

function checkNodePortAddresses(items: string[]): string[] {
  if (items.includes("primary")) {
    if (items.length > 1) throw new Error(`"primary" cannot be combined with CIDRs`);
    return items;
  }
  for (const c of items) if (!isCIDR(c)) throw new Error(`"${c}" is neither a CIDR nor "primary"`);
  return items;
}

function detectMode(v: string): DetectLocalMode {
  if (!DETECT_MODES.includes(v as DetectLocalMode)) {
    throw new Error(`"${v}" is not one of ${DETECT_MODES.join(", ")}`);
  }
  return v as DetectLocalMode;
}

function loggingFormat(v: string): LoggingFormat {
  if (v !== "text" && v !== "json") throw new Error(`"${v}" is not "text" or "json"`);
  return v;
}

function proxyMode(v: string): "nftables" {
  if (v !== "nftables" && v !== "") {
    throw new Error(
      `"${v}" is not supported: kube-nft-proxy implements only the "nftables" mode ` +
        `(run upstream kube-proxy for ${v})`,
    );
  }
  return "nftables";
}

function hostPortValidator(defaultPort: number) {
  return (v: string) => {
    normalizeHostPort(v, defaultPort); // validate only; defaults depend on --bind-address
    return v;
  };
}

function ipAddress(v: string): string {
  if (!isIPv4(v) && !isIPv6(v)) throw new Error(`"${v}" is not an IP address`);
  return v;
}

function nonEmpty(v: string): string {
  if (v.trim() === "") throw new Error("the value must not be empty");
  return v;
}

function masterURL(v: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new Error(`"${v}" is not a URL`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new Error(`"${v}" must start with http:// or https://`);
  }
  return v.replace(/\/+$/, "");
}

/** Every supported flag. Exported for docs/flags.md and --help. */
export const FLAGS: readonly FlagSpec[] = [
  { name: "config", kind: "string", help: "Path to a KubeProxyConfiguration file." },
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
    form: `comma-separated CIDRs, or "primary"`,
    convert: nodePortList,
    help:
      "Node IPs that accept NodePort traffic. Empty = the node's primary IPs (use 0.0.0.0/0,::/0 for all).",
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
    help: "fwmark bit used to mark packets for SNAT (alias --masquerade-bit).",
  },
  {
    name: "masquerade-bit",
    kind: "int",
    key: "masqueradeBit",
    form: "an integer 0..31",
    convert: intIn(0, 31),
    help: "Alias of --iptables-masquerade-bit.",
  },
  {
    name: "sync-period",
    kind: "duration",
    key: "syncPeriodMs",
    def: "30s",
    form: "a Go duration > 0, e.g. 30s",
    convert: positiveDuration,
    help: "Maximum interval between rule resyncs.",
  },
  {
    name: "min-sync-period",
    kind: "duration",
    key: "minSyncPeriodMs",
    def: "1s",
    form: "a Go duration >= 0, e.g. 1s or 500ms",
    convert: nonNegativeDuration,
    help: "Minimum interval between rule syncs (batches bursts of changes).",
  },
  {
    name: "iptables-sync-period",
    kind: "duration",
    key: "syncPeriodMs",
    form: "a Go duration > 0, e.g. 30s",
    convert: positiveDuration,
    help: "Upstream's name for --sync-period (kube-proxy uses it in nftables mode too).",
  },
  {
    name: "iptables-min-sync-period",
    kind: "duration",
    key: "minSyncPeriodMs",
    form: "a Go duration >= 0, e.g. 1s or 500ms",
    convert: nonNegativeDuration,
    help: "Upstream's name for --min-sync-period.",
  },
  {
    name: "full-sync-period",
    kind: "duration",
    key: "fullSyncPeriodMs",
    def: "1h",
    form: "a Go duration > 0, e.g. 1h",
    convert: positiveDuration,
    help:
      "Longest interval between full syncs, which compare the whole ruleset with the kernel (ours; an idle --sync-period tick does one too).",
  },
  {
    name: "conntrack-reconciler-period",
    kind: "duration",
    key: "conntrackReconcilerPeriodMs",
    def: "30s",
    form: "a Go duration > 0, e.g. 30s",
    convert: positiveDuration,
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
    help: "Address of the /metrics server. Empty disables it.",
  },
  {
    name: "conntrack-max-per-core",
    kind: "int",
    key: "ctMaxPerCore",
    def: "32768",
    form: "an integer >= 0",
    convert: intIn(0, 2 ** 31 - 1),
    help: "Conntrack entries per CPU core (0 = leave nf_conntrack_max alone).",
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
    name: "dry-run",
    kind: "bool",
    key: "dryRun",
    def: "false",
    help: "Print the nftables transactions each sync would run; touch nothing (ours).",
  },
  { name: "version", kind: "bool", key: "version", help: "Print the version and exit." },
  {
    name: "lib-dir",
    kind: "string",
    key: "libDir",
    convert: nonEmpty,
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

const FLAG_BY_NAME = new Map(FLAGS.map((f) => [f.name, f]));

/** Renders the --help text. */
export function usage(): string {
  const lines = [
    "Usage: kube-nft-proxy [flags]",
    "",
    "A Kubernetes service proxy (kube-proxy nftables mode drop-in).",
    "Flags take --name=value or --name value; booleans take --name or --name=false.",
    "",
  ];
  for (const f of FLAGS) {
    const arg = f.kind === "bool" ? "" : ` ${f.kind}`;
    const def = f.def !== undefined ? ` (default ${JSON.stringify(f.def)})` : "";
    lines.push(`  --${f.name}${arg}`, `      ${f.help}${def}`);
  }
  return lines.join("\n") + "\n";
}

function convertFlag(f: FlagSpec, raw: string): unknown {
  try {
    if (f.kind === "bool") {
      if (raw === "true" || raw === "1" || raw === "t" || raw === "True" || raw === "TRUE") {
        return true;
      }
      if (raw === "false" || raw === "0" || raw === "f" || raw === "False" || raw === "FALSE") {
        return false;
      }
      throw new Error(`"${raw}" is not a boolean`);
    }
    return f.convert ? f.convert(raw) : raw;
  } catch (e) {
    const form = f.kind === "bool" ? "--" + f.name + " or --" + f.name + "=true|false" : f.form;
    throw new UsageError(
      `invalid value for --${f.name}: ${(e as Error).message}` + (form ? `; expected ${form}` : ""),
    );
  }
}

interface FlagParse {
  settings: Settings;
  configFile?: string;
  /** Accepted upstream flags that have no effect here. */
  warnings: string[];
}

function parseFlags(argv: string[]): FlagParse {
  const settings: Settings = {};
  const warnings: string[] = [];
  let configFile: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    // `deno task start -- --flag` passes the separator through; there are no positionals.
    if (arg === "--") continue;
    let body: string;
    if (arg.startsWith("--")) body = arg.slice(2);
    else if (arg === "-v" || arg.startsWith("-v=")) body = arg.slice(1);
    else if (arg === "-h") body = "help";
    else {
      throw new UsageError(
        `unexpected argument "${arg}": flags look like --name=value (see --help)`,
      );
    }
    const eq = body.indexOf("=");
    const name = eq < 0 ? body : body.slice(0, eq);
    const f = FLAG_BY_NAME.get(name);
    const ignored = f ? undefined : IGNORED_FLAGS.get(name);
    if (ignored) {
      // Consume its value as upstream's parser would, then say it does nothing here.
      if (eq < 0 && !ignored.bool && i + 1 < argv.length) i++;
      warnings.push(
        `flag --${name} is accepted for compatibility and has no effect: ${ignored.why}`,
      );
      continue;
    }
    if (!f) {
      const near = didYouMean(name, [...FLAG_BY_NAME.keys(), ...IGNORED_FLAGS.keys()]);
      throw new UsageError(
        `unknown flag --${name}` + (near ? `; did you mean --${near}?` : "") +
          " (see --help for the supported flags)",
      );
    }
    let raw: string;
    if (eq >= 0) raw = body.slice(eq + 1);
    else if (f.kind === "bool") raw = "true";
    else {
      if (i + 1 >= argv.length) {
        throw new UsageError(
          `flag --${name} needs a value: --${name}=<value>` + (f.form ? ` (${f.form})` : ""),
        );
      }
      raw = argv[++i];
    }
    if (name === "config") {
      configFile = nonEmptyFlag("config", raw);
      continue;
    }
    if (name === "kubeconfig") {
      settings.kubeconfig = nonEmptyFlag("kubeconfig", raw);
      continue;
    }
    if (f.key) (settings as Record<string, unknown>)[f.key] = convertFlag(f, raw);
  }
  return { settings, configFile, warnings };
}

function nonEmptyFlag(name: string, raw: string): string {
  if (raw === "") throw new UsageError(`--${name} needs a file path, got an empty value`);
  return raw;
}

// ---------------------------------------------------------------------------------------------
// Config file

const CONFIG_API_VERSION = "kubeproxy.config.k8s.io/v1alpha1";

/** Fields upstream defines that do not apply here: accepted with a warning. */
const IGNORED_FIELDS = new Set([
  "clientConnection.acceptContentTypes",
  "clientConnection.contentType",
  "clientConnection.qps",
  "clientConnection.burst",
  "featureGates",
  "iptables",
  "ipvs",
  "winkernel",
  "nftables.localhostNodePorts",
  "oomScoreAdj",
  "portRange",
  "configSyncPeriod",
  "showHiddenMetricsForVersion",
  "enableProfiling",
  "healthzBindAddresses",
  "metricsBindAddresses",
  "logging.flushFrequency",
  "logging.options",
  "logging.vmodule",
  "windowsRunAsService",
  "linux",
]);

type FieldKind = "string" | "bool" | "int" | "duration" | "stringList" | "object";

interface FieldSpec {
  kind: FieldKind;
  key?: keyof Settings;
  convert?: (v: string) => unknown;
  /** null allowed (upstream pointer fields). */
  nullable?: boolean;
}

const FIELDS: Record<string, FieldSpec> = {
  apiVersion: { kind: "string" },
  kind: { kind: "string" },
  bindAddress: { kind: "string", key: "bindAddress", convert: ipAddress },
  healthzBindAddress: {
    kind: "string",
    key: "healthzBindAddress",
    convert: hostPortValidator(10256),
  },
  metricsBindAddress: {
    kind: "string",
    key: "metricsBindAddress",
    convert: hostPortValidator(10249),
  },
  clusterCIDR: { kind: "string", key: "clusterCIDRs", convert: cidrList },
  hostnameOverride: { kind: "string", key: "hostnameOverride" },
  clientConnection: { kind: "object" },
  "clientConnection.kubeconfig": { kind: "string", key: "kubeconfig" },
  mode: { kind: "string", key: "mode", convert: proxyMode },
  nodePortAddresses: { kind: "stringList", key: "nodePortAddresses", nullable: true },
  detectLocalMode: { kind: "string", key: "detectLocalMode", convert: detectMode },
  detectLocal: { kind: "object" },
  "detectLocal.bridgeInterface": { kind: "string", key: "podBridgeInterface" },
  "detectLocal.interfaceNamePrefix": { kind: "string", key: "podInterfaceNamePrefix" },
  syncPeriod: { kind: "duration", key: "syncPeriodMs", convert: positiveDuration },
  minSyncPeriod: { kind: "duration", key: "minSyncPeriodMs", convert: nonNegativeDuration },
  nftables: { kind: "object" },
  "nftables.masqueradeAll": { kind: "bool", key: "masqueradeAll" },
  "nftables.masqueradeBit": { kind: "int", key: "masqueradeBit", nullable: true },
  "nftables.syncPeriod": { kind: "duration", key: "syncPeriodMs", convert: positiveDuration },
  "nftables.minSyncPeriod": {
    kind: "duration",
    key: "minSyncPeriodMs",
    convert: nonNegativeDuration,
  },
  conntrack: { kind: "object" },
  "conntrack.maxPerCore": { kind: "int", key: "ctMaxPerCore", nullable: true },
  "conntrack.min": { kind: "int", key: "ctMin", nullable: true },
  "conntrack.tcpEstablishedTimeout": {
    kind: "duration",
    key: "ctTcpEstablishedMs",
    convert: nonNegativeDuration,
    nullable: true,
  },
  "conntrack.tcpCloseWaitTimeout": {
    kind: "duration",
    key: "ctTcpCloseWaitMs",
    convert: nonNegativeDuration,
    nullable: true,
  },
  "conntrack.tcpBeLiberal": { kind: "bool", key: "ctTcpBeLiberal" },
  "conntrack.udpTimeout": { kind: "duration", key: "ctUdpMs", convert: nonNegativeDuration },
  "conntrack.udpStreamTimeout": {
    kind: "duration",
    key: "ctUdpStreamMs",
    convert: nonNegativeDuration,
  },
  logging: { kind: "object" },
  "logging.format": { kind: "string", key: "loggingFormat", convert: loggingFormat },
  "logging.verbosity": { kind: "int", key: "verbosity" },
};

/** The config-file fields we read (for docs). */
export const CONFIG_FIELDS: readonly string[] = Object.keys(FIELDS).filter((k) =>
  FIELDS[k].kind !== "object" && k !== "apiVersion" && k !== "kind"
);

const INT_RANGES: Partial<Record<keyof Settings, [number, number]>> = {
  masqueradeBit: [0, 31],
  ctMaxPerCore: [0, 2 ** 31 - 1],
  ctMin: [0, 2 ** 31 - 1],
  verbosity: [0, 10],
};

function typeName(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "list";
  return typeof v === "object" ? "map" : typeof v;
}

function fieldError(path: string, msg: string): UsageError {
  return new UsageError(`config file: field "${path}": ${msg}`);
}

function readField(path: string, spec: FieldSpec, v: unknown, out: Settings): void {
  if (v === null && spec.nullable) return;
  const want = spec.kind === "stringList"
    ? "a list of strings"
    : spec.kind === "duration"
    ? `a duration string such as "30s"`
    : spec.kind === "int"
    ? "an integer"
    : spec.kind === "bool"
    ? "true or false"
    : "a string";
  let value: unknown;
  switch (spec.kind) {
    case "string":
    case "duration":
      if (typeof v !== "string") throw fieldError(path, `expected ${want}, got ${typeName(v)}`);
      value = v;
      break;
    case "bool":
      if (typeof v !== "boolean") throw fieldError(path, `expected ${want}, got ${typeName(v)}`);
      value = v;
      break;
    case "int":
      if (typeof v !== "number" || !Number.isInteger(v)) {
        throw fieldError(path, `expected ${want}, got ${typeName(v)} ${JSON.stringify(v)}`);
      }
      value = v;
      break;
    case "stringList":
      if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
        throw fieldError(path, `expected ${want}, got ${typeName(v)}`);
      }
      try {
        value = checkNodePortAddresses(v as string[]);
      } catch (e) {
        throw fieldError(path, (e as Error).message);
      }
      break;
  }
  if (spec.convert) {
    try {
      value = spec.convert(value as string);
    } catch (e) {
      throw fieldError(path, (e as Error).message);
    }
  }
  const range = spec.key ? INT_RANGES[spec.key] : undefined;
  if (range && typeof value === "number" && (value < range[0] || value > range[1])) {
    throw fieldError(path, `${value} is outside ${range[0]}..${range[1]}`);
  }
  if (spec.key) (out as Record<string, unknown>)[spec.key] = value;
}

function walk(
  obj: Record<string, unknown>,
  prefix: string,
  out: Settings,
  warnings: string[],
): void {
  for (const [k, v] of Object.entries(obj)) {
    const path = prefix ? `${prefix}.${k}` : k;
    const spec = FIELDS[path];
    if (!spec) {
      if (IGNORED_FIELDS.has(path) || IGNORED_FIELDS.has(prefix)) {
        warnings.push(`config file: field "${path}" does not apply to kube-nft-proxy; ignored`);
      } else {
        warnings.push(`config file: unknown field "${path}"; ignored`);
      }
      continue;
    }
    if (spec.kind === "object") {
      if (v === null) continue;
      if (typeof v !== "object" || Array.isArray(v)) {
        throw fieldError(path, `expected a map, got ${typeName(v)}`);
      }
      walk(v as Record<string, unknown>, path, out, warnings);
      continue;
    }
    if (isUnsetValue(path, spec, v)) continue;
    readField(path, spec, v, out);
  }
}

/**
 * Go's zero values mean "use the default" in a KubeProxyConfiguration, as
 * upstream's defaulting does: kubeadm writes `detectLocalMode: ""`,
 * `healthzBindAddress: ""` and `syncPeriod: 0s` into every config it makes.
 * The conntrack values are the exception: there 0 means "leave it alone".
 */
function isUnsetValue(path: string, spec: FieldSpec, v: unknown): boolean {
  if (v === null || v === "") return true;
  if (spec.kind === "duration" && /(^|\.)(syncPeriod|minSyncPeriod)$/.test(path)) {
    try {
      return parseGoDuration(String(v)) === 0;
    } catch {
      return false;
    }
  }
  return false;
}

/** Parses KubeProxyConfiguration YAML text into settings; unknown fields become warnings. */
function parseConfigText(text: string, file: string, warnings: string[]): Settings {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new UsageError(`config file ${file}: not valid YAML: ${(e as Error).message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new UsageError(`config file ${file}: expected a KubeProxyConfiguration map`);
  }
  const o = doc as Record<string, unknown>;
  if (o.kind !== "KubeProxyConfiguration") {
    throw new UsageError(
      `config file ${file}: kind must be "KubeProxyConfiguration", got ${JSON.stringify(o.kind)}`,
    );
  }
  if (o.apiVersion !== CONFIG_API_VERSION) {
    throw new UsageError(
      `config file ${file}: apiVersion must be "${CONFIG_API_VERSION}", got ` +
        JSON.stringify(o.apiVersion),
    );
  }
  const out: Settings = {};
  // nftables.* wins over the top-level syncPeriod/minSyncPeriod: read top-level first.
  const { nftables, ...rest } = o;
  walk(rest, "", out, warnings);
  if (nftables !== undefined) walk({ nftables }, "", out, warnings);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Assembly

function finish(s: Settings, configFile: string | undefined, warnings: string[]): AgentConfig {
  const bindAddress = s.bindAddress ?? "0.0.0.0";
  const v6 = isIPv6(bindAddress);
  const healthz = s.healthzBindAddress ?? (v6 ? "[::]:10256" : "0.0.0.0:10256");
  const metrics = s.metricsBindAddress ?? (v6 ? "[::1]:10249" : "127.0.0.1:10249");
  const cfg: AgentConfig = {
    configFile,
    kubeconfig: s.kubeconfig,
    master: s.master,
    hostnameOverride: s.hostnameOverride,
    bindAddress,
    clusterCIDRs: s.clusterCIDRs ?? [],
    detectLocalMode: s.detectLocalMode ?? "ClusterCIDR",
    podBridgeInterface: s.podBridgeInterface,
    podInterfaceNamePrefix: s.podInterfaceNamePrefix,
    nodePortAddresses: s.nodePortAddresses ?? [],
    masqueradeAll: s.masqueradeAll ?? false,
    masqueradeBit: s.masqueradeBit ?? 14,
    syncPeriodMs: s.syncPeriodMs ?? 30_000,
    minSyncPeriodMs: s.minSyncPeriodMs ?? 1_000,
    fullSyncPeriodMs: s.fullSyncPeriodMs ?? 3_600_000,
    conntrackReconcilerPeriodMs: s.conntrackReconcilerPeriodMs ?? 30_000,
    healthzBindAddress: normalizeHostPort(healthz, 10256),
    metricsBindAddress: normalizeHostPort(metrics, 10249),
    conntrack: {
      maxPerCore: s.ctMaxPerCore ?? 32768,
      min: s.ctMin ?? 131072,
      tcpEstablishedTimeoutMs: s.ctTcpEstablishedMs ?? 86_400_000,
      tcpCloseWaitTimeoutMs: s.ctTcpCloseWaitMs ?? 3_600_000,
      tcpBeLiberal: s.ctTcpBeLiberal ?? false,
      udpTimeoutMs: s.ctUdpMs ?? 0,
      udpStreamTimeoutMs: s.ctUdpStreamMs ?? 0,
    },
    cleanup: s.cleanup ?? false,
    initOnly: s.initOnly ?? false,
    writeConfigTo: s.writeConfigTo,
    verbosity: s.verbosity ?? 0,
    loggingFormat: s.loggingFormat ?? "text",
    dryRun: s.dryRun ?? false,
    version: s.version ?? false,
    help: s.help ?? false,
    libDir: s.libDir,
    mode: "nftables",
    warnings,
  };
  validate(cfg);
  return cfg;
}

function validate(c: AgentConfig): void {
  if (c.help || c.version) return;
  const v4 = c.clusterCIDRs.filter((x) => x.includes("."));
  if (v4.length > 1 || c.clusterCIDRs.length - v4.length > 1) {
    throw new UsageError(
      `--cluster-cidr / clusterCIDR: at most one CIDR per IP family, got ${
        c.clusterCIDRs.join(",")
      }`,
    );
  }
  if (c.detectLocalMode === "BridgeInterface" && !c.podBridgeInterface) {
    throw new UsageError(
      "--detect-local-mode=BridgeInterface needs --pod-bridge-interface=<name> " +
        "(or detectLocal.bridgeInterface in the config file)",
    );
  }
  if (c.detectLocalMode === "InterfaceNamePrefix" && !c.podInterfaceNamePrefix) {
    throw new UsageError(
      "--detect-local-mode=InterfaceNamePrefix needs --pod-interface-name-prefix=<prefix> " +
        "(or detectLocal.interfaceNamePrefix in the config file)",
    );
  }
  if (c.minSyncPeriodMs > c.syncPeriodMs) {
    throw new UsageError(
      `--min-sync-period (${formatGoDuration(c.minSyncPeriodMs)}) must not exceed ` +
        `--sync-period (${formatGoDuration(c.syncPeriodMs)})`,
    );
  }
  if (c.detectLocalMode === "ClusterCIDR" && c.clusterCIDRs.length === 0) {
    c.warnings.push(
      "detect-local-mode is ClusterCIDR but no --cluster-cidr is set: local traffic is not " +
        "detected (as upstream)",
    );
  }
}

/**
 * Parses the command line (without the program name), reads `--config` if given, and
 * returns the merged, validated configuration. Throws {@link UsageError} on bad input.
 */
export function parseArgs(
  argv: string[],
  readFile: (path: string) => string = Deno.readTextFileSync,
): AgentConfig {
  const { settings: flagSettings, configFile, warnings } = parseFlags(argv);
  let fileSettings: Settings = {};
  if (configFile !== undefined && !flagSettings.help && !flagSettings.version) {
    let text: string;
    try {
      text = readFile(configFile);
    } catch (e) {
      throw new UsageError(`--config: cannot read ${configFile}: ${(e as Error).message}`);
    }
    fileSettings = parseConfigText(text, configFile, warnings);
  }
  return finish({ ...fileSettings, ...flagSettings }, configFile, warnings);
}
