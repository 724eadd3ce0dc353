/**
 * Command line + config file + defaults -> one validated {@link AgentConfig}.
 *
 * Precedence: built-in defaults < `--config` file < flags given on the command line. (Upstream
 * kube-proxy ignores most flags when --config is given; we let flags win so a single setting can
 * be overridden without editing the file.)
 *
 * @module
 */
import { type AgentConfig, type BindCIDRs, type Settings, UsageError } from "./types.ts";
import { parseFlags } from "./command_line.ts";
import { parseConfigText } from "./config_file.ts";
import { V1ALPHA2 } from "./config_fields.ts";
import { isIPv6 } from "../../net/ip.ts";
import { formatGoDuration } from "../../net/duration.ts";
import { normalizeHostPort } from "./values.ts";
import { aggregate, proxyGates, resolveGates } from "./feature_gates.ts";

/** v1alpha2's defaults for the address lists (upstream's SetDefaults_KubeProxyConfiguration). */
const V1ALPHA2_HEALTHZ: BindCIDRs = { cidrs: ["0.0.0.0/0", "::/0"], port: 10256 };
const V1ALPHA2_METRICS: BindCIDRs = { cidrs: ["127.0.0.0/8", "::1/128"], port: 10249 };

function isUnspecified(ip: string): boolean {
  return ip === "0.0.0.0" || ip === "::";
}

/** Settings of the file with the command line's on top; a flag replaces a v1alpha2 list. */
function merge(file: Settings, flags: Settings): Settings {
  const s: Settings = { ...file, ...flags };
  if (flags.healthzBindAddress !== undefined) {
    delete s.healthzBindCIDRs, delete s.healthzBindPort;
  }
  if (flags.metricsBindAddress !== undefined) {
    delete s.metricsBindCIDRs, delete s.metricsBindPort;
  }
  if (flags.bindAddress !== undefined) delete s.nodeIPOverride;
  // Gate by gate: a flag overrides the file's value of the gates it names.
  if (file.featureGates || flags.featureGates) {
    s.featureGates = { ...file.featureGates, ...flags.featureGates };
  }
  return s;
}

/**
 * The v1alpha1-shaped "host:port" of a v1alpha2 list, as upstream converts it: its first CIDR's
 * address, except that a /0 is the wildcard and 127.0.0.0/8 the usual loopback address.
 */
function firstAddress(b: BindCIDRs): string {
  const [ip, bits] = b.cidrs[0].split("/");
  const v6 = ip.includes(":");
  const host = bits === "0" ? (v6 ? "::" : "0.0.0.0") : ip === "127.0.0.0" ? "127.0.0.1" : ip;
  return normalizeHostPort(v6 ? `[${host}]` : host, b.port);
}

/**
 * A server's "host:port" from the flag or v1alpha1 field and the deprecated --*-port flag, which
 * upstream applies only where the address has no port of its own (AppendPortIfNeeded); 0 disables.
 */
function serverAddress(
  addr: string | undefined,
  deprecatedPort: number | undefined,
  defaultHost: string,
  defaultPort: number,
): string {
  if (deprecatedPort === 0) return "";
  return normalizeHostPort(addr ?? defaultHost, deprecatedPort ?? defaultPort);
}

/** The gates of `s`, through upstream's SetFromMap; its errors are fatal. */
function featureGates(s: Settings, warnings: string[]) {
  const given = s.featureGates ?? {};
  const r = resolveGates(given);
  // Upstream prints --version (and --help) before it checks the gates.
  if (r.errors.length && !s.help && !s.version) {
    throw new UsageError(`--feature-gates / featureGates: ${aggregate(r.errors)}`);
  }
  warnings.push(...r.warnings);
  return { featureGates: given, gates: proxyGates(r.enabled) };
}

/** The health and metrics servers' addresses: v1alpha2's CIDR form, or host:port. */
function serverAddresses(
  s: Settings,
  configFile: string | undefined,
  v1alpha2: boolean,
  v6: boolean,
  warnings: string[],
): Pick<
  AgentConfig,
  "healthzBindAddress" | "healthzBindCIDRs" | "metricsBindAddress" | "metricsBindCIDRs"
> {
  // Upstream ignores the deprecated port flags when a config file is given.
  const hzPort = configFile === undefined ? s.healthzPort : undefined;
  const mPort = configFile === undefined ? s.metricsPort : undefined;
  if (configFile !== undefined && (s.healthzPort !== undefined || s.metricsPort !== undefined)) {
    warnings.push("--healthz-port and --metrics-port are ignored with --config, as upstream");
  }
  let healthzBindCIDRs: BindCIDRs | undefined;
  let metricsBindCIDRs: BindCIDRs | undefined;
  if (v1alpha2 && s.healthzBindAddress === undefined) {
    healthzBindCIDRs = {
      cidrs: s.healthzBindCIDRs ?? V1ALPHA2_HEALTHZ.cidrs,
      port: s.healthzBindPort ?? V1ALPHA2_HEALTHZ.port,
    };
  }
  if (v1alpha2 && s.metricsBindAddress === undefined) {
    metricsBindCIDRs = {
      cidrs: s.metricsBindCIDRs ?? V1ALPHA2_METRICS.cidrs,
      port: s.metricsBindPort ?? V1ALPHA2_METRICS.port,
    };
  }
  const healthzBindAddress = healthzBindCIDRs
    ? firstAddress(healthzBindCIDRs)
    : serverAddress(s.healthzBindAddress, hzPort, v6 ? "[::]" : "0.0.0.0", 10256);
  const metricsBindAddress = metricsBindCIDRs
    ? firstAddress(metricsBindCIDRs)
    : serverAddress(s.metricsBindAddress, mPort, v6 ? "[::1]" : "127.0.0.1", 10249);
  return { healthzBindAddress, healthzBindCIDRs, metricsBindAddress, metricsBindCIDRs };
}

/** The log format and destination; a klog setting we do not implement is a warning. */
function logging(
  s: Settings,
  warnings: string[],
): Pick<AgentConfig, "loggingFormat" | "logSplitStream" | "logFile"> {
  const loggingFormat = s.loggingFormat ?? "text";
  let logFile: string | undefined;
  if (s.logToStderr === false) {
    if (s.logFile) logFile = s.logFile;
    else {
      warnings.push(
        "--logtostderr=false without --log-file: klog would write files under --log-dir, " +
          "which is not implemented; logging to stderr",
      );
    }
  }
  const logSplitStream = (loggingFormat === "json" ? s.logJsonSplitStream : s.logTextSplitStream) ??
    false;
  return { loggingFormat, logSplitStream, logFile };
}

/** The conntrack sysctls with upstream's defaults. */
function conntrackConfig(s: Settings): AgentConfig["conntrack"] {
  return {
    maxPerCore: s.ctMaxPerCore ?? 32768,
    min: s.ctMin ?? 131072,
    tcpEstablishedTimeoutMs: s.ctTcpEstablishedMs ?? 86_400_000,
    tcpCloseWaitTimeoutMs: s.ctTcpCloseWaitMs ?? 3_600_000,
    tcpBeLiberal: s.ctTcpBeLiberal ?? false,
    udpTimeoutMs: s.ctUdpMs ?? 0,
    udpStreamTimeoutMs: s.ctUdpStreamMs ?? 0,
  };
}

/** The validated configuration of `s`: defaults applied, one field per AgentConfig member. */
function finish(
  s: Settings,
  configFile: string | undefined,
  apiVersion: string | undefined,
  warnings: string[],
  flagsGiven: Record<string, string>,
): AgentConfig {
  const v1alpha2 = apiVersion === V1ALPHA2.apiVersion;
  const nodeIPOverride = s.nodeIPOverride ?? (s.bindAddress ? [s.bindAddress] : []);
  const bindAddress = s.bindAddress ?? nodeIPOverride[0] ?? "0.0.0.0";
  // Evaluated in this order so the warnings keep theirs: servers, logging, gates.
  const servers = serverAddresses(s, configFile, v1alpha2, isIPv6(bindAddress), warnings);
  const log = logging(s, warnings);
  const cfg: AgentConfig = {
    configFile,
    configApiVersion: apiVersion,
    kubeconfig: s.kubeconfig,
    master: s.master,
    hostnameOverride: s.hostnameOverride,
    bindAddress,
    nodeIPOverride: nodeIPOverride.filter((ip) => !isUnspecified(ip)),
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
    ...servers,
    conntrack: conntrackConfig(s),
    cleanup: s.cleanup ?? false,
    cleanupIptablesNft: s.cleanupIptablesNft ?? false,
    initOnly: s.initOnly ?? false,
    writeConfigTo: s.writeConfigTo,
    verbosity: s.verbosity ?? 0,
    ...log,
    alsoLogToStderr: s.alsoLogToStderr ?? false,
    dryRun: s.dryRun ?? false,
    version: s.version ?? false,
    help: s.help ?? false,
    libDir: s.libDir,
    mode: "nftables",
    ...featureGates(s, warnings),
    flagsGiven,
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
  const ip4 = c.nodeIPOverride.filter((x) => x.includes("."));
  if (ip4.length > 1 || c.nodeIPOverride.length - ip4.length > 1) {
    throw new UsageError(
      `nodeIPOverride: at most one IP per family, got ${c.nodeIPOverride.join(",")}`,
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
      `the min sync period (${formatGoDuration(c.minSyncPeriodMs)}) must not exceed ` +
        `the sync period (${formatGoDuration(c.syncPeriodMs)})`,
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
  const { settings: flagSettings, configFile, warnings, given } = parseFlags(argv);
  let fileSettings: Settings = {};
  let apiVersion: string | undefined;
  if (configFile !== undefined && !flagSettings.help && !flagSettings.version) {
    let text: string;
    try {
      text = readFile(configFile);
    } catch (e) {
      throw new UsageError(`--config: cannot read ${configFile}: ${(e as Error).message}`);
    }
    ({ settings: fileSettings, apiVersion } = parseConfigText(text, configFile, warnings));
  }
  return finish(merge(fileSettings, flagSettings), configFile, apiVersion, warnings, given);
}
