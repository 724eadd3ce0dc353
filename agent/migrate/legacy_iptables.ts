/**
 * Legacy (x_tables) iptables, detected without an iptables binary. Rules written by
 * `iptables-legacy` live in the kernel's x_tables, which nftables cannot list or change; the
 * agent can only see which legacy tables are loaded in its network namespace, from
 * /proc/net/ip_tables_names and /proc/net/ip6_tables_names. A loaded table says that something
 * used iptables-legacy here (kube-proxy's legacy image, Docker, a firewall script); it does not
 * say whether kube-proxy's KUBE-* chains are in it, which only `iptables-legacy-save` can show.
 *
 * @module
 */
import * as libcFiles from "../../ffi/libc_files.ts";

/** The legacy tables loaded in this network namespace, per family. */
export interface LegacyTables {
  /** /proc/net/ip_tables_names (iptables-legacy). */
  ipv4: string[];
  /** /proc/net/ip6_tables_names (ip6tables-legacy). */
  ipv6: string[];
}

/** Reads a kernel file; Deno.errors.NotFound when it does not exist. */
export type ReadFile = (path: string) => string;

function names(read: ReadFile, path: string): string[] {
  try {
    return read(path).split("\n").map((s) => s.trim()).filter((s) => s !== "").sort();
  } catch (err) {
    // No file: ip_tables (or ip6_tables) is not loaded at all, so there is no legacy table.
    if (err instanceof Deno.errors.NotFound) return [];
    throw err;
  }
}

/**
 * The legacy tables of this network namespace (/proc/net is the reading thread's namespace).
 * `read` defaults to libc (Deno refuses /proc without --allow-all).
 */
export function readLegacyTables(read: ReadFile = libcFiles.readTextFileSync): LegacyTables {
  return {
    ipv4: names(read, "/proc/net/ip_tables_names"),
    ipv6: names(read, "/proc/net/ip6_tables_names"),
  };
}

/** Whether any legacy table is loaded. */
export function hasLegacyTables(t: LegacyTables): boolean {
  return t.ipv4.length > 0 || t.ipv6.length > 0;
}

/** What was detected, for the log line, e.g. "ip_tables: filter,nat; ip6_tables: none". */
export function describeLegacy(t: LegacyTables): string {
  const list = (xs: string[]) => xs.length === 0 ? "none" : xs.join(",");
  return `ip_tables: ${list(t.ipv4)}; ip6_tables: ${list(t.ipv6)}`;
}

/**
 * The refusal, with the manual step: what the agent saw, what it cannot see, and how to check
 * and remove kube-proxy's legacy rules.
 */
export function legacyRefusal(t: LegacyTables): string {
  return "Not removing legacy iptables rules: legacy (x_tables) iptables tables are loaded in " +
    `this network namespace (${describeLegacy(t)}), and kube-nft-proxy cannot list or change ` +
    "x_tables without an iptables binary. Check on the node with " +
    "`iptables-legacy-save | grep KUBE-` and `ip6tables-legacy-save | grep KUBE-`; if either " +
    "prints kube-proxy's chains, remove them with the kube-proxy image you ran " +
    "(`kube-proxy --cleanup --proxy-mode=iptables`, with its legacy iptables), or by hand with " +
    "`iptables-legacy -t nat -F KUBE-SERVICES` ... and `-X` for each KUBE-* chain of kube-proxy " +
    "after deleting the jumps to them from PREROUTING/OUTPUT/POSTROUTING/INPUT/FORWARD. " +
    "Services are served by kube-nft-proxy's own rules meanwhile";
}
