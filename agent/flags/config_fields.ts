/**
 * The KubeProxyConfiguration fields this agent reads, per apiVersion, and the upstream fields it
 * accepts without effect. v1alpha1 is the version every released kube-proxy reads (and kubeadm
 * writes). v1alpha2 follows upstream's v1alpha2 work (pkg/proxy/apis/config/v1alpha2, not in a
 * released kube-proxy as of v1.34): sync periods at the top level, the Linux settings under
 * `linux`, list-valued node IPs, bind addresses as CIDRs plus a port.
 *
 * @module
 */
import type { Settings } from "./types.ts";
import {
  checkNodePortAddresses,
  cidr,
  cidrList,
  detectMode,
  hostPortValidator,
  ipAddress,
  loggingFormat,
  nonNegativeDuration,
  positiveDuration,
  proxyMode,
} from "./values.ts";

/** The YAML type a field takes. */
export type FieldKind =
  | "string"
  | "bool"
  | "int"
  | "duration"
  | "stringList"
  | "boolMap"
  | "object";

/** How one field is read. */
export interface FieldSpec {
  /** YAML type. */
  kind: FieldKind;
  /** Settings key it fills; absent for maps and for apiVersion/kind. */
  key?: keyof Settings;
  /** Converts/validates a scalar (strings and durations); throws Error(reason). */
  convert?: (v: string) => unknown;
  /** Converts/validates a list; throws Error(reason). */
  convertList?: (v: string[]) => unknown;
  /** Accepted integer range. */
  range?: [number, number];
  /** null allowed (upstream pointer fields). */
  nullable?: boolean;
  /** Go's zero value of this field ("", 0, 0s, []) means "use the default", as upstream defaults. */
  zeroIsUnset?: boolean;
}

/** A version's field table and the upstream fields (or whole maps) it ignores. */
export interface ConfigSchema {
  /** apiVersion. */
  apiVersion: string;
  /** Leaf and map fields read, by dotted path. */
  fields: Readonly<Record<string, FieldSpec>>;
  /** Upstream fields with no effect here (a map's path covers everything under it). */
  ignored: ReadonlySet<string>;
}

const INT32: [number, number] = [0, 2 ** 31 - 1];
const PORT: [number, number] = [0, 65535];

function ipList(v: string[]): string[] {
  return v.map(ipAddress);
}

function cidrs(v: string[]): string[] {
  return v.map(cidr);
}

/** Fields both versions read in the same place. */
const COMMON: Record<string, FieldSpec> = {
  apiVersion: { kind: "string" },
  kind: { kind: "string" },
  hostnameOverride: { kind: "string", key: "hostnameOverride" },
  clientConnection: { kind: "object" },
  "clientConnection.kubeconfig": { kind: "string", key: "kubeconfig" },
  mode: { kind: "string", key: "mode", convert: proxyMode },
  featureGates: { kind: "boolMap", key: "featureGates" },
  nodePortAddresses: {
    kind: "stringList",
    key: "nodePortAddresses",
    nullable: true,
    convertList: checkNodePortAddresses,
  },
  detectLocalMode: { kind: "string", key: "detectLocalMode", convert: detectMode },
  detectLocal: { kind: "object" },
  "detectLocal.bridgeInterface": { kind: "string", key: "podBridgeInterface" },
  "detectLocal.interfaceNamePrefix": { kind: "string", key: "podInterfaceNamePrefix" },
  syncPeriod: {
    kind: "duration",
    key: "syncPeriodMs",
    convert: positiveDuration,
    zeroIsUnset: true,
  },
  minSyncPeriod: {
    kind: "duration",
    key: "minSyncPeriodMs",
    convert: nonNegativeDuration,
    zeroIsUnset: true,
  },
  nftables: { kind: "object" },
  "nftables.masqueradeBit": { kind: "int", key: "masqueradeBit", nullable: true, range: [0, 31] },
  logging: { kind: "object" },
  "logging.format": { kind: "string", key: "loggingFormat", convert: loggingFormat },
  "logging.verbosity": { kind: "int", key: "verbosity", range: [0, 10] },
  "logging.options": { kind: "object" },
  "logging.options.text": { kind: "object" },
  "logging.options.text.splitStream": { kind: "bool", key: "logTextSplitStream" },
  "logging.options.json": { kind: "object" },
  "logging.options.json.splitStream": { kind: "bool", key: "logJsonSplitStream" },
};

/** The conntrack map's fields (v1alpha1 `conntrack`, v1alpha2 `linux.conntrack`). */
function conntrackFields(prefix: string): Record<string, FieldSpec> {
  return {
    [prefix]: { kind: "object" },
    [`${prefix}.maxPerCore`]: { kind: "int", key: "ctMaxPerCore", nullable: true, range: INT32 },
    [`${prefix}.min`]: { kind: "int", key: "ctMin", nullable: true, range: INT32 },
    [`${prefix}.tcpEstablishedTimeout`]: {
      kind: "duration",
      key: "ctTcpEstablishedMs",
      convert: nonNegativeDuration,
      nullable: true,
    },
    [`${prefix}.tcpCloseWaitTimeout`]: {
      kind: "duration",
      key: "ctTcpCloseWaitMs",
      convert: nonNegativeDuration,
      nullable: true,
    },
    [`${prefix}.tcpBeLiberal`]: { kind: "bool", key: "ctTcpBeLiberal" },
    [`${prefix}.udpTimeout`]: { kind: "duration", key: "ctUdpMs", convert: nonNegativeDuration },
    [`${prefix}.udpStreamTimeout`]: {
      kind: "duration",
      key: "ctUdpStreamMs",
      convert: nonNegativeDuration,
    },
  };
}

/** Upstream fields of both versions that do not apply here. */
const IGNORED_COMMON = [
  "clientConnection.acceptContentTypes",
  "clientConnection.contentType",
  "clientConnection.qps",
  "clientConnection.burst",
  "ipvs",
  "winkernel",
  "configSyncPeriod",
  "showHiddenMetricsForVersion",
  "enableProfiling",
  "bindAddressHardFail",
  "logging.flushFrequency",
  "logging.vmodule",
  "logging.options.text.infoBufferSize",
  "logging.options.json.infoBufferSize",
];

/** kubeproxy.config.k8s.io/v1alpha1. */
export const V1ALPHA1: ConfigSchema = {
  apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
  fields: {
    ...COMMON,
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
    "nftables.masqueradeAll": { kind: "bool", key: "masqueradeAll" },
    "nftables.syncPeriod": {
      kind: "duration",
      key: "syncPeriodMs",
      convert: positiveDuration,
      zeroIsUnset: true,
    },
    "nftables.minSyncPeriod": {
      kind: "duration",
      key: "minSyncPeriodMs",
      convert: nonNegativeDuration,
      zeroIsUnset: true,
    },
    ...conntrackFields("conntrack"),
  },
  ignored: new Set([
    ...IGNORED_COMMON,
    "iptables",
    "nftables.localhostNodePorts",
    "oomScoreAdj",
    "portRange",
    "udpIdleTimeout",
    "healthzBindAddresses",
    "metricsBindAddresses",
    "windowsRunAsService",
    "linux",
  ]),
};

/**
 * v1alpha1's `iptables` map, read only when `mode` is unset or "": upstream would then run its
 * default (iptables) mode with these values, so they are what the operator tuned.
 */
export const V1ALPHA1_IPTABLES: Readonly<Record<string, FieldSpec>> = {
  iptables: { kind: "object" },
  "iptables.masqueradeAll": { kind: "bool", key: "masqueradeAll" },
  "iptables.masqueradeBit": { kind: "int", key: "masqueradeBit", nullable: true, range: [0, 31] },
  "iptables.syncPeriod": {
    kind: "duration",
    key: "syncPeriodMs",
    convert: positiveDuration,
    zeroIsUnset: true,
  },
  "iptables.minSyncPeriod": {
    kind: "duration",
    key: "minSyncPeriodMs",
    convert: nonNegativeDuration,
    zeroIsUnset: true,
  },
};

/** kubeproxy.config.k8s.io/v1alpha2. */
export const V1ALPHA2: ConfigSchema = {
  apiVersion: "kubeproxy.config.k8s.io/v1alpha2",
  fields: {
    ...COMMON,
    nodeIPOverride: { kind: "stringList", key: "nodeIPOverride", convertList: ipList },
    healthzBindAddresses: {
      kind: "stringList",
      key: "healthzBindCIDRs",
      convertList: cidrs,
      zeroIsUnset: true,
    },
    healthzBindPort: { kind: "int", key: "healthzBindPort", range: PORT, zeroIsUnset: true },
    metricsBindAddresses: {
      kind: "stringList",
      key: "metricsBindCIDRs",
      convertList: cidrs,
      zeroIsUnset: true,
    },
    metricsBindPort: { kind: "int", key: "metricsBindPort", range: PORT, zeroIsUnset: true },
    linux: { kind: "object" },
    "linux.masqueradeAll": { kind: "bool", key: "masqueradeAll" },
    ...conntrackFields("linux.conntrack"),
    "detectLocal.clusterCIDRs": { kind: "stringList", key: "clusterCIDRs", convertList: cidrs },
  },
  ignored: new Set([
    ...IGNORED_COMMON,
    "iptables",
    "windows",
    "configHardFail",
    "linux.oomScoreAdj",
  ]),
};

/** The config file versions read, by apiVersion. */
export const SCHEMAS: ReadonlyMap<string, ConfigSchema> = new Map(
  [V1ALPHA1, V1ALPHA2].map((s) => [s.apiVersion, s]),
);
