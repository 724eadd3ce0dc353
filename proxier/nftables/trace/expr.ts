/**
 * The tracer's pure pieces: the packet as it travels (addresses, mark, NAT, its share of new
 * connections and its steps), forking it, the selectors and literals of the rule vocabulary
 * kube-nft-proxy writes, a `dnat ... map` key, and the words that say why a branch ends.
 *
 * @module
 */
import type { Element } from "../../../ffi/nftables/types.ts";
import { cidrContains, parseCIDR } from "../../../net/cidr.ts";
import { nftFamily } from "../../../net/family.ts";
import { canonicalIP, parseIP } from "../../../net/ip.ts";
import type { Branch, Step } from "./types.ts";

/** The packet on one path through the ruleset. */
export interface Pkt {
  /** Source address (canonical). */
  saddr: string;
  /** Destination address (canonical; changed by DNAT). */
  daddr: string;
  /** `tcp`, `udp` or `sctp`. */
  proto: string;
  /** Destination port (changed by DNAT). */
  dport: number;
  /** The packet mark. */
  mark: number;
  /** Input interface name. */
  iif: string;
  /** `ip:port` once DNATed. */
  dnat?: string;
  /** True once masquerade applies. */
  masq: boolean;
  /** Share of new connections on this path. */
  p: number;
  /** What happened so far. */
  steps: Step[];
  /** The rule or element that decided a DROP/REJECT (for the reason). */
  cause?: Step;
}

/** How a rule, chain or hook ends for one path. */
export type Outcome = "next" | "return" | "accept" | "drop" | "reject";

/** One path's packet and outcome. */
export interface Res {
  /** The packet on this path. */
  pkt: Pkt;
  /** How the path ends. */
  v: Outcome;
}

/** Throws with what the tracer could not interpret. */
export type Fail = (why: string) => never;

/** A copy of `p` with `step` appended and its share scaled by `share`. */
export function fork(p: Pkt, step?: Step, share = 1): Pkt {
  return { ...p, p: p.p * share, steps: step ? [...p.steps, step] : [...p.steps] };
}

/** The canonical text of an address (anything else unchanged). */
export function canon(s: string): string {
  return canonicalIP(s) ?? s;
}

/** Whether `addr` is loopback or one of the node's own addresses (`local`, canonical). */
export function isLocal(addr: string, local: ReadonlySet<string>): boolean {
  const p = parseIP(addr);
  if (p && p.family === 4 && p.bytes[0] === 127) return true;
  if (addr === "::1") return true;
  return local.has(addr);
}

/** Why a branch ends as it does. */
export function reasonOf(b: Omit<Branch, "reason">, cause: Step | undefined): string {
  if (b.verdict === "ACCEPT") {
    if (b.dnat !== undefined) return `DNAT to endpoint ${b.dnat}`;
    return "not translated: no Service frontend on this node matches";
  }
  if (b.steps.some((s) => s.element?.startsWith("no-endpoint-"))) {
    return b.verdict === "REJECT"
      ? "the Service has no endpoints"
      : "no endpoint this traffic may use (traffic policy Local, none on this node)";
  }
  if (cause?.chain === "cluster-ips-check") {
    return cause.rule?.includes("@cluster-ips")
      ? "the ClusterIP has no such port and protocol"
      : "unallocated ClusterIP (in a ServiceCIDR, but no Service has it)";
  }
  if (cause?.chain.startsWith("firewall-")) return "source not in loadBalancerSourceRanges";
  return `${b.verdict} in chain ${cause?.chain ?? "?"}`;
}

/** A selector's value when its implied protocol does not hold: equal to no literal or element. */
const NO_VALUE = "\u0000";

/** Reads one selector at t[i]; returns its value for the packet and the next index. */
export function selector(t: string[], i: number, pkt: Pkt, fail: Fail): [string, number] {
  const w = t[i];
  if ((w === "ip" || w === "ip6") && (t[i + 1] === "saddr" || t[i + 1] === "daddr")) {
    const fam = nftFamily(parseIP(pkt.daddr)?.family ?? 4);
    if (fam !== w) fail(`${w} selector on an ${fam} packet`);
    return [t[i + 1] === "saddr" ? pkt.saddr : pkt.daddr, i + 2];
  }
  if (w === "meta" && t[i + 1] === "l4proto") return [pkt.proto, i + 2];
  if (w === "th" && t[i + 1] === "dport") return [String(pkt.dport), i + 2];
  if ((w === "tcp" || w === "udp" || w === "sctp") && t[i + 1] === "dport") {
    // `udp dport` carries an implied `meta l4proto udp`: another protocol never matches.
    return [pkt.proto === w ? String(pkt.dport) : NO_VALUE, i + 2];
  }
  if (w === "iifname") return [pkt.iif, i + 1];
  if (w === "meta" && t[i + 1] === "mark") {
    if (t[i + 2] === "&") {
      const m = Number(t[i + 3]);
      if (!Number.isFinite(m)) fail("mark mask");
      return [String((pkt.mark & m) >>> 0), i + 4];
    }
    return [String(pkt.mark), i + 2];
  }
  return fail(`selector "${w}"`);
}

/**
 * The key of `dnat to <key> map @m` (words `t[from..]` up to `map`): each part's value for
 * the packet, undefined for the one `numgen random mod N` part, and N (1 without numgen).
 */
export function dnatKey(
  t: string[],
  from: number,
  pkt: Pkt,
  fail: Fail,
): { fixed: (string | undefined)[]; buckets: number } {
  const parts: string[][] = [[]];
  for (const tok of t.slice(from, t.length - 2)) {
    if (tok === ".") parts.push([]);
    else parts[parts.length - 1].push(tok);
  }
  let buckets = 1;
  const fixed = parts.map((p) => {
    if (p[0] === "numgen") {
      if (p[1] !== "random" || p[2] !== "mod" || p.length !== 4) fail("numgen in a map key");
      buckets = Number(p[3]);
      return undefined;
    }
    // nft lists a map key's `th dport` as `tcp dport` when the map's data
    // is typed that way: the same transport-header load.
    if (p.length === 2 && p[1] === "dport" && /^(tcp|udp|sctp)$/.test(p[0])) {
      return String(pkt.dport);
    }
    const [v, n] = selector(p, 0, pkt, fail);
    if (n !== p.length) fail(`map key part "${p.join(" ")}"`);
    return v;
  });
  return { fixed, buckets };
}

/** `name: key : value "comment"`, for steps. */
export function describe(name: string, e: Element): string {
  const v = e.value === undefined ? "" : ` : ${e.value.join(" . ")}`;
  const c = e.comment === undefined ? "" : ` (${e.comment})`;
  return `${name}: ${e.key.join(" . ")}${v}${c}`;
}

/** Whether a selector's value matches a literal right-hand side (string, CIDR, IP, number). */
export function matchLiteral(value: string, rhs: string, fail: Fail): boolean {
  if (rhs.startsWith('"')) {
    const s = rhs.slice(1, -1);
    return s.endsWith("*") ? value.startsWith(s.slice(0, -1)) : value === s;
  }
  if (rhs.includes("/")) {
    const c = parseCIDR(rhs) ?? fail(`CIDR ${rhs}`);
    const ip = parseIP(value);
    return ip !== null && cidrContains(c, ip);
  }
  if (parseIP(rhs)) return canon(value) === canon(rhs);
  if (/^(0x[0-9a-f]+|[0-9]+)$/i.test(rhs)) return Number(value) === Number(rhs);
  if (/^(tcp|udp|sctp)$/.test(rhs)) return value === rhs;
  return fail(`literal ${rhs}`);
}
