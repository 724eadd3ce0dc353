/**
 * Rule text in the in-memory nftables: what a rule body refers to (jump and
 * goto targets, `@set` names), how many anonymous sets it makes, its comment,
 * and the names nft parses as keywords.
 *
 * @module
 */
import { NftTokenError, tokenizeNft } from "../tokens.ts";
import { unquote } from "./datatypes.ts";
import { invalid } from "./errors.ts";
import { checkWords, type Lookup, lookupTypes } from "./expr.ts";

/** Splits nft rule text into tokens (quoted strings kept whole, with their quotes). */
function tokenize(rule: string): string[] {
  try {
    return tokenizeNft(rule, "{}(),:;").map((t) => t.raw);
  } catch (e) {
    if (e instanceof NftTokenError) invalid(`rule "${rule}": unterminated string`);
    throw e;
  }
}

/** What a rule body refers to, and how many anonymous sets it makes. */
export interface RuleRefs {
  /** Chains it jumps or goes to (verdicts and verdict maps). */
  chains: string[];
  /** Named sets and maps it refers to. */
  sets: string[];
  /** Named counters the rule updates (`counter name "x"`). */
  counters: string[];
  /** The lookups among `sets`, with their key expressions' types where known. */
  lookups: Lookup[];
  /** Anonymous sets it makes (each takes a handle). */
  anonSets: number;
  /** The body as the kernel lists it back. */
  body: string;
  /** A comment written inside the body. */
  comment?: string;
}

/** Parses a rule body: its references, anonymous sets and comment. */
export function analyseRule(text: string, comment: string | undefined): RuleRefs {
  const toks = tokenize(text);
  if (toks.length === 0) invalid("empty rule");
  let body = text.trim();
  // A trailing `comment "..."` in the body is the rule's comment, as the kernel stores it.
  const n = toks.length;
  if (n >= 2 && toks[n - 2] === "comment" && toks[n - 1].startsWith('"')) {
    if (comment !== undefined) invalid(`rule "${text}" has two comments`);
    comment = unquote(toks[n - 1]);
    body = body.slice(0, body.lastIndexOf("comment")).trimEnd();
    toks.length = n - 2;
    if (toks.length === 0) invalid(`rule "${text}" has only a comment`);
  }
  if (comment !== undefined) checkComment(comment);
  checkWords(text, toks, KEYWORDS);
  const chains: string[] = [];
  const sets: string[] = [];
  const counters: string[] = [];
  const lookups: Lookup[] = [];
  let anonSets = 0;
  // Stack of open braces: whether each is an anonymous set (vs a dynset key) and its shape.
  const stack: { anon: boolean; colon: boolean; comma: boolean }[] = [];
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t === "jump" || t === "goto") {
      const target = toks[i + 1];
      if (target === undefined || /^[{}(),:;]$/.test(target)) {
        invalid(`rule "${text}": ${t} needs a chain name`);
      }
      chains.push(unquote(target));
      i++;
    } else if (t === "counter" && toks[i + 1] === "name") {
      const target = toks[i + 2];
      if (target === undefined || /^[{}(),:;]$/.test(target)) {
        invalid(`rule "${text}": counter name needs a counter`);
      }
      counters.push(unquote(target));
      i += 2;
    } else if (t.startsWith("@")) {
      if (t.length === 1) invalid(`rule "${text}": "@" needs a set name`);
      checkName("set", t.slice(1));
      sets.push(t.slice(1));
      lookups.push({ set: t.slice(1), types: lookupTypes(toks, i) });
    } else if (t === "{") {
      // `update @s { ip saddr }` holds a key expression, not a set.
      const prev = toks[i - 1] ?? "";
      stack.push({ anon: !prev.startsWith("@"), colon: false, comma: false });
    } else if (t === "}") {
      const top = stack.pop();
      if (top === undefined) invalid(`rule "${text}": unbalanced "}"`);
      // nft turns a one-element anonymous set into a plain comparison.
      if (top.anon && (top.colon || top.comma)) anonSets++;
    } else if (t === ":" && stack.length > 0) stack[stack.length - 1].colon = true;
    else if (t === "," && stack.length > 0) stack[stack.length - 1].comma = true;
  }
  if (stack.length > 0) invalid(`rule "${text}": unbalanced "{"`);
  return { chains, sets, counters, lookups, anonSets, body, comment };
}

/**
 * Words nft 1.0.6 parses as keywords, so they fail as unquoted chain, set or
 * map names (script.ts does not quote names). Measured with `nft -c`.
 */
export const KEYWORDS: ReadonlySet<string> = new globalThis.Set(
  ("dnat snat missing counter accept drop jump goto return continue masquerade redirect " +
    "reject log limit ip ip6 tcp udp sctp meta ct mark table chain set map element rule vmap " +
    "type hook priority policy flags timeout comment elements handle position add delete " +
    "flush insert replace create list numgen random th fib update dynamic interval constant " +
    "queue notrack dup fwd size tproxy synproxy exists xt devices device netdev arp bridge " +
    "inet ether vlan icmp icmpv6 esp ah comp dccp udplite igmp rt frag hbh mh dst srh " +
    "exthdr osf socket secmark quota").split(" "),
);

/** Refuses a chain, set or map name nft would not parse. */
export function checkName(what: string, name: string): void {
  if (name.length === 0 || name.length > 255) {
    invalid(`${what} name "${name}" must be 1-255 characters`);
  }
  if (/[\s"]/.test(name)) invalid(`${what} name "${name}" must not contain spaces or quotes`);
  if (KEYWORDS.has(name)) {
    invalid(`syntax error: ${what} name "${name}" is an nft keyword; choose another name`);
  }
}

/** nft's limit on a comment (NFT_USERDATA_MAXLEN): 128 bytes of UTF-8, though nft says characters. */
const MAX_COMMENT_BYTES = 128;

/** Refuses a comment longer than nft allows, with nft's words. */
export function checkComment(comment: string): void {
  if (new TextEncoder().encode(comment).length > MAX_COMMENT_BYTES) {
    invalid(`comment too long, ${MAX_COMMENT_BYTES} characters maximum allowed`);
  }
}
