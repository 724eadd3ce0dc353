/**
 * kube-proxy's flags that mean nothing to this agent, accepted so that an existing kube-proxy
 * DaemonSet or unit runs unchanged (each gets a one-line warning), and the "did you mean" hint
 * for flags nobody knows.
 *
 * Names are upstream's (v1.34: cmd/kube-proxy/app/options.go, component-base's logging flags,
 * klog's flags, which kube-proxy still registers through the Go flag set, and the Windows-only
 * flags of options_windows.go), plus flags older manifests still pass that upstream has since
 * removed. Upstream normalizes `_` to `-` in flag names (`--log_dir` is `--log-dir`); so do we.
 *
 * @module
 */

/** An accepted upstream flag with no effect here. */
export interface IgnoredFlag {
  /** Takes no value (`--name` alone means true). */
  bool?: boolean;
  /** Why it has no effect, for the warning. */
  why: string;
}

const IPVS = "the ipvs mode is not implemented; this agent is nftables only";
const IPTABLES = "iptables-mode only";
const WINDOWS = "Windows (kernelspace mode) only";
const KLOG_FILES = "klog's log files are not implemented, only --log-file (see docs/flags.md)";
const KLOG_HEADER = "lines keep klog's default header";

/** Upstream flags accepted and ignored, by name. */
export const IGNORED_FLAGS: ReadonlyMap<string, IgnoredFlag> = new Map<string, IgnoredFlag>([
  [
    "oom-score-adj",
    {
      why: "set by whoever starts the agent: kubelet gives system-node-critical pods -997, " +
        "the systemd unit sets OOMScoreAdjust=-999",
    },
  ],
  ["resource-container", { why: "removed upstream in 1.16" }],
  ["kube-api-content-type", { why: "lists and watches always use JSON" }],
  ["kube-api-qps", { why: "the agent sends a few requests per resync, not a stream" }],
  ["kube-api-burst", { why: "the agent sends a few requests per resync, not a stream" }],
  ["config-sync-period", { why: "watches resume from the last version; no periodic re-list" }],
  ["port-range", { why: "has no effect in nftables mode upstream either" }],
  ["proxy-port-range", { why: "userspace-mode only (removed upstream)" }],
  ["profiling", { bool: true, why: "there is no pprof endpoint" }],
  ["show-hidden-metrics-for-version", { why: "no metric is hidden" }],
  ["bind-address-hard-fail", { bool: true, why: "the healthz/metrics servers always fail hard" }],
  ["iptables-localhost-nodeports", { bool: true, why: IPTABLES }],
  ["ipvs-sync-period", { why: IPVS }],
  ["ipvs-min-sync-period", { why: IPVS }],
  ["ipvs-scheduler", { why: IPVS }],
  ["ipvs-exclude-cidrs", { why: IPVS }],
  ["ipvs-strict-arp", { bool: true, why: IPVS }],
  ["ipvs-tcp-timeout", { why: IPVS }],
  ["ipvs-tcpfin-timeout", { why: IPVS }],
  ["ipvs-udp-timeout", { why: IPVS }],
  ["udp-timeout", { why: "userspace-mode only (removed upstream)" }],
  ["source-vip", { why: WINDOWS }],
  ["network-name", { why: WINDOWS }],
  ["enable-dsr", { bool: true, why: WINDOWS }],
  ["root-hnsendpoint-name", { why: WINDOWS }],
  ["forward-healthcheck-vip", { bool: true, why: WINDOWS }],
  ["windows-service", { bool: true, why: WINDOWS }],
  ["log-flush-frequency", { why: "every log line is written at once" }],
  ["log-text-info-buffer-size", { why: "info lines are not buffered" }],
  ["log-json-info-buffer-size", { why: "info lines are not buffered" }],
  ["vmodule", { why: "per-file verbosity is not supported; --v applies everywhere" }],
  ["log-dir", { why: KLOG_FILES }],
  ["log-file-max-size", { why: KLOG_FILES }],
  ["log-backtrace-at", { why: "log lines carry no stack traces" }],
  ["skip-headers", { bool: true, why: KLOG_HEADER }],
  ["skip-log-headers", { bool: true, why: KLOG_FILES }],
  ["stderrthreshold", { why: KLOG_FILES }],
  ["one-output", { bool: true, why: KLOG_FILES }],
  ["add-dir-header", { bool: true, why: KLOG_HEADER }],
]);

/** Upstream's name normalization (component-base's WordSepNormalizeFunc): `_` is `-`. */
export function normalizeFlagName(name: string): string {
  return name.replaceAll("_", "-");
}

/** Edit distance (insertions, deletions, substitutions). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}

/** The known flag closest to `name`, when it is close enough to be a typo. */
export function didYouMean(name: string, known: Iterable<string>): string | undefined {
  let best: string | undefined, bestD = Infinity;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d < bestD) [best, bestD] = [k, d];
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(name.length / 5)) ? best : undefined;
}
