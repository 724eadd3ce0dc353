/**
 * Rule expressions in the in-memory nftables, checked as far as nft 1.0.6
 * checks what the proxier writes: every bare word must be one nft knows
 * (`frobnicate drop` is a syntax error), and the expression in front of a
 * `@set` lookup, `vmap @m` or `map @m` must have the set's key type
 * (`ip daddr @v6set` is a datatype mismatch). Expressions it does not know
 * are not type-checked.
 *
 * @module
 */
import { typeofDatatype } from "./datatypes.ts";
import { invalid } from "./errors.ts";

/**
 * Words nft 1.0.6 parses in rule bodies, beyond {@link KEYWORDS} names: the
 * statements, expressions and values a kube-proxy ruleset uses, and their
 * common neighbours. A word outside both is refused.
 */
const RULE_WORDS = new globalThis.Set(
  ("saddr daddr sport dport l4proto protocol nfproto to mod offset inc state new established " +
    "related invalid untracked status snat dnat confirmed expected seen-reply assured dying " +
    "local unicast multicast broadcast anycast blackhole unreachable prohibit addr with or and " +
    "xor oif iif oifname iifname iiftype oiftype pkttype host other packets bytes prefix level " +
    "fully-random persistent random-fully port tcp-reset admin-prohibited port-unreachable " +
    "host-unreachable net-unreachable prot-unreachable addr-unreachable no-route icmpx reset " +
    "echo-request echo-reply original reply helper zone label nexthop iifgroup oifgroup " +
    "length hoplimit ttl nexthdr dscp ecn version flowlabel id frag-off checksum hdrlength " +
    "sequence ackseq doff window urgptr option skuid skgid cpu rtclassid cgroup ibrname " +
    "obrname priority per second minute hour day week over until burst name").split(" "),
);

/** A word nft parses: keywords, words it knows in rules, and words that are values. */
function isKnownWord(t: string, keywords: ReadonlySet<string>): boolean {
  if (!/^[A-Za-z][\w-]*$/.test(t)) return true; // numbers, addresses, operators, strings
  if (/^[0-9a-fA-F]{1,4}$/.test(t)) return true; // a group of an IPv6 address split at ':'
  return keywords.has(t) || RULE_WORDS.has(t);
}

/** Words after which the next token (or `{ ... }` group) is a name or value, not a keyword. */
const VALUE_AFTER = new globalThis.Set(["jump", "goto", "iifname", "oifname", "!=", "=="]);

/**
 * Refuses the first bare word nft would not parse. `toks` is the rule
 * without its trailing comment.
 */
export function checkWords(text: string, toks: string[], keywords: ReadonlySet<string>): void {
  let valueDepth = 0;
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t === "{" && valueDepth > 0) valueDepth++;
    else if (t === "}" && valueDepth > 0) valueDepth--;
    if (valueDepth > 0 || t.startsWith("@") || t.startsWith('"')) continue;
    const prev = toks[i - 1];
    if (prev !== undefined && VALUE_AFTER.has(prev)) {
      if (t === "{") valueDepth = 1;
      if (t !== "!=" && t !== "==") continue;
    }
    if (!isKnownWord(t, keywords)) {
      invalid(`syntax error, unexpected "${t}" in rule "${text}" (not an nft keyword)`);
    }
  }
}

/** A lookup of a named set or map, with the datatypes of the expression that looks it up. */
export interface Lookup {
  /** The set's or map's name. */
  set: string;
  /** Datatype names of the key expression's parts; undefined when not known. */
  types?: string[];
}

/** The datatype of the one expression that ends at toks[end], with its first token's index. */
function exprAt(toks: string[], end: number): { type: string; start: number } | undefined {
  for (const len of [1, 2, 4, 6]) {
    const start = end - len + 1;
    if (start < 0) break;
    try {
      return { type: typeofDatatype(toks.slice(start, end + 1).join(" "), "lookup"), start };
    } catch {
      // not this length
    }
  }
  return undefined;
}

/** The key expression in front of the `@set` at toks[at], as datatype names, or undefined. */
export function lookupTypes(toks: string[], at: number): string[] | undefined {
  let end = at - 1;
  if (toks[end] === "vmap" || toks[end] === "map" || toks[end] === "!=" || toks[end] === "==") {
    end--;
  }
  const types: string[] = [];
  for (;;) {
    const e = exprAt(toks, end);
    if (e === undefined) return undefined;
    types.unshift(e.type);
    if (toks[e.start - 1] !== ".") return types;
    end = e.start - 2;
  }
}

const TYPE_TEXT: Record<string, string> = {
  ipv4_addr: "IPv4 address",
  ipv6_addr: "IPv6 address",
  inet_service: "internet network service",
  inet_proto: "Internet protocol",
  mark: "packet mark",
  integer: "integer",
  ifname: "network interface name",
  ether_addr: "Ethernet address",
  verdict: "verdict",
};

/** A type as nft names it in a datatype mismatch. */
function describe(types: string[]): string {
  const one = (t: string) => TYPE_TEXT[t] ?? t;
  return types.length === 1 ? one(types[0]) : `concatenation of (${types.map(one).join(", ")})`;
}

/**
 * Refuses a lookup whose expression does not have the set's key type, with
 * nft's words: `datatype mismatch, expected <expression's type>, expression
 * has type <set's type>`.
 */
export function checkLookupType(l: Lookup, keyTypes: string[]): void {
  if (l.types === undefined) return;
  if (l.types.join(" . ") === keyTypes.join(" . ")) return;
  invalid(
    `datatype mismatch, expected ${describe(l.types)}, expression has type ${
      describe(keyTypes)
    } (@${l.set})`,
  );
}
