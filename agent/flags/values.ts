/**
 * Value parsers shared by the command line and the config file: IPs, CIDRs, durations and
 * host:port (over net/), and the per-setting converters (each throws a plain Error saying what is wrong).
 *
 * @module
 */
import { isCIDR } from "../../net/cidr.ts";
import { parseGoDuration } from "../../net/duration.ts";
import { nodePortAddressErrors } from "../../net/nodeport_addresses.ts";
import { canonicalText, isIPv4, isIPv6, parseIP } from "../../net/ip.ts";
import type { DetectLocalMode, LoggingFormat } from "./types.ts";

/**
 * `s` with IPv4 leading zeros dropped ("010.0.0.1" -> "10.0.0.1"), other text unchanged.
 * Upstream reads these settings with k8s.io/utils/net ParseIPSloppy and uses the parsed
 * address, so "010" means decimal 10, not an error and not octal.
 */
function withoutLeadingZeros(s: string): string {
  const ip = parseIP(s);
  return ip?.family === 4 ? canonicalText(s, ip) : s;
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
    host = withoutLeadingZeros(host);
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

/** The accepted --detect-local-mode values. */
export const DETECT_MODES: readonly DetectLocalMode[] = [
  "ClusterCIDR",
  "NodeCIDR",
  "BridgeInterface",
  "InterfaceNamePrefix",
];

/** A converter accepting integers in lo..hi. */
export function intIn(lo: number, hi: number): (v: string) => number {
  return (v: string) => {
    if (!/^[+-]?\d+$/.test(v.trim())) throw new Error(`"${v}" is not an integer`);
    const n = Number(v);
    if (n < lo || n > hi) throw new Error(`${n} is outside ${lo}..${hi}`);
    return n;
  };
}

/** A Go duration >= 0, in ms. */
export function nonNegativeDuration(v: string): number {
  const ms = parseGoDuration(v);
  if (ms < 0) throw new Error(`duration "${v}" must not be negative`);
  return ms;
}

/** A Go duration > 0, in ms. */
export function positiveDuration(v: string): number {
  const ms = parseGoDuration(v);
  if (ms <= 0) throw new Error(`duration "${v}" must be greater than 0`);
  return ms;
}

/** A CIDR (ParseCIDRSloppy, as upstream), its address without IPv4 leading zeros. */
export function cidr(c: string): string {
  if (!isCIDR(c)) throw new Error(`"${c}" is not a CIDR`);
  const slash = c.indexOf("/");
  return withoutLeadingZeros(c.slice(0, slash)) + c.slice(slash);
}

/** Comma-separated CIDRs. */
export function cidrList(v: string): string[] {
  return v.split(",").map((s) => s.trim()).filter((s) => s !== "").map(cidr);
}

/** Comma-separated --nodeport-addresses: CIDRs and the keywords primary, localhost, all. */
export function nodePortList(v: string): string[] {
  const items = v.split(",").map((s) => s.trim()).filter((s) => s !== "");
  return checkNodePortAddresses(items);
}

/**
 * Checks a nodePortAddresses list as upstream validates it (net/nodeport_addresses.ts): CIDRs
 * and the keywords, `all` alone. CIDRs come back without IPv4 leading zeros.
 */
export function checkNodePortAddresses(items: string[]): string[] {
  const errs = nodePortAddressErrors(items);
  if (errs.length > 0) throw new Error(errs.join("; "));
  return items.map((s) => isCIDR(s) ? cidr(s) : s);
}

/** One of {@link DETECT_MODES}. */
export function detectMode(v: string): DetectLocalMode {
  if (!DETECT_MODES.includes(v as DetectLocalMode)) {
    throw new Error(`"${v}" is not one of ${DETECT_MODES.join(", ")}`);
  }
  return v as DetectLocalMode;
}

/** "text" or "json". */
export function loggingFormat(v: string): LoggingFormat {
  if (v !== "text" && v !== "json") throw new Error(`"${v}" is not "text" or "json"`);
  return v;
}

/** "nftables", or "" (which upstream would default; here it can only mean nftables). */
export function proxyMode(v: string): "nftables" {
  if (v !== "nftables" && v !== "") {
    throw new Error(
      `"${v}" is not supported: kube-nft-proxy implements only the "nftables" mode ` +
        `(run upstream kube-proxy for ${v})`,
    );
  }
  return "nftables";
}

/** A converter checking "host:port" (or a bare IP, or "") without applying defaults. */
export function hostPortValidator(defaultPort: number): (v: string) => string {
  return (v: string) => {
    normalizeHostPort(v, defaultPort); // validate only; defaults depend on --bind-address
    return v;
  };
}

/** A literal IPv4 or IPv6 address. */
export function ipAddress(v: string): string {
  if (!isIPv4(v) && !isIPv6(v)) throw new Error(`"${v}" is not an IP address`);
  return withoutLeadingZeros(v);
}

/** Any non-blank string. */
export function nonEmpty(v: string): string {
  if (v.trim() === "") throw new Error("the value must not be empty");
  return v;
}

/** An http(s) URL, without trailing slashes. */
export function masterURL(v: string): string {
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
