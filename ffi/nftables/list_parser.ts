/**
 * Parses libnftables' text listing (`list table`, `list chains`, `list set`,
 * `list map`, printed with output flags HANDLE and NUMERIC_PRIO) into the
 * typed model of types.ts.
 *
 * Text rather than JSON because, on 1.0.6, only the text form keeps chain and
 * set comments and the `dynamic` set flag, and it gives rule bodies in nft
 * syntax directly. Rule bodies come back in the kernel's normalised form (for
 * example `counter` gains `packets 0 bytes 0`); see client.ts for what
 * round-trips exactly.
 *
 * @module
 */
import { parseNftDuration } from "../../net/duration.ts";
import type {
  Chain,
  ChainType,
  Element,
  Family,
  Hook,
  Map as NftMap,
  Rule,
  Set as NftSet,
  SetFlag,
  TableState,
} from "./types.ts";
import {
  type NftToken,
  NftTokenError,
  readQuoted as readNftQuoted,
  tokenizeNft,
} from "./tokens.ts";

/** Raised when the listing does not have the expected shape. */
export class ListParseError extends Error {
  /** A parse failure, at `line` (0-based) when known. */
  constructor(message: string, readonly line?: number) {
    super(line === undefined ? message : `${message} (listing line ${line + 1})`);
    this.name = "ListParseError";
  }
}

/** Symbolic chain priorities of the ip, ip6 and inet families. */
const PRIORITY_NAMES: Readonly<Record<string, number>> = {
  raw: -300,
  mangle: -150,
  dstnat: -100,
  filter: 0,
  security: 50,
  srcnat: 100,
};

/** Parses `-100`, `dstnat`, `dstnat - 10`, `filter + 5` to a number. */
export function parsePriority(text: string): number {
  const t = text.trim();
  if (/^-?\d+$/.test(t)) return Number(t);
  const m = /^([a-z]+)\s*(?:([+-])\s*(\d+))?$/.exec(t);
  if (m === null || !(m[1] in PRIORITY_NAMES)) {
    throw new ListParseError(`unknown chain priority "${t}"`);
  }
  const base = PRIORITY_NAMES[m[1]];
  return m[2] === undefined ? base : base + (m[2] === "-" ? -1 : 1) * Number(m[3]);
}

/** An nft duration in seconds, or a ListParseError. */
function duration(text: string): number {
  try {
    return parseNftDuration(text);
  } catch (err) {
    throw new ListParseError((err as Error).message);
  }
}

/** Reads a double-quoted string starting at `s[i]`; returns its value and the index after it. */
function readQuoted(s: string, i: number): { value: string; end: number } {
  try {
    return readNftQuoted(s, i);
  } catch (e) {
    throw e instanceof NftTokenError ? new ListParseError(e.message) : e;
  }
}

/** A token of an element: a bare word, or a quoted string (value unescaped). */
type Token = Pick<NftToken, "text" | "quoted">;

function tokenize(s: string): Token[] {
  try {
    return tokenizeNft(s);
  } catch (e) {
    throw e instanceof NftTokenError ? new ListParseError(e.message) : e;
  }
}

/** Splits `s` at top-level commas (outside quotes and braces). */
function splitTopLevel(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '"') {
      i = readQuoted(s, i).end - 1;
    } else if (c === "{") {
      depth++;
    } else if (c === "}") {
      depth--;
    } else if (c === "," && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

/** Groups tokens into parts separated by `.` tokens, each part's words joined by a space. */
function concatParts(tokens: Token[]): string[] {
  const parts: string[] = [];
  let cur: string[] = [];
  for (const t of tokens) {
    if (!t.quoted && t.text === ".") {
      parts.push(cur.join(" "));
      cur = [];
    } else {
      cur.push(t.quoted ? `"${t.text}"` : t.text);
    }
  }
  parts.push(cur.join(" "));
  return parts;
}

/** Words that end an element's key: the attributes nft prints after it. */
const ELEMENT_ATTRS = new Set(["timeout", "expires", "comment", "counter", ":"]);

/**
 * Parses one element as listed, e.g. `198.18.1.1 . tcp . 80 comment "a" : goto svc-a`.
 * Timeouts, expiry and counters are read past and dropped (the model has no place for them).
 */
export function parseElement(text: string, target: { set?: string; map?: string }): Element {
  const tokens = tokenize(text);
  let i = 0;
  const keyTokens: Token[] = [];
  while (i < tokens.length && (tokens[i].quoted || !ELEMENT_ATTRS.has(tokens[i].text))) {
    keyTokens.push(tokens[i++]);
  }
  if (keyTokens.length === 0) throw new ListParseError(`element without a key: ${text}`);
  const el: Element = { kind: "element", ...target, key: concatParts(keyTokens) };
  while (i < tokens.length) {
    const t = tokens[i];
    if (t.text === ":" && !t.quoted) {
      el.value = concatParts(tokens.slice(i + 1));
      break;
    }
    switch (t.text) {
      case "timeout":
      case "expires":
        i += 2;
        break;
      case "comment":
        if (tokens[i + 1] === undefined) throw new ListParseError(`dangling comment in: ${text}`);
        el.comment = tokens[i + 1].text;
        i += 2;
        break;
      case "counter": // counter packets N bytes M
        i += 5;
        break;
      default:
        throw new ListParseError(`unexpected "${t.text}" in element: ${text}`);
    }
  }
  return el;
}

/** Parses the inside of `elements = { ... }`. */
export function parseElements(body: string, target: { set?: string; map?: string }): Element[] {
  return splitTopLevel(body).map((e) => parseElement(e, target));
}

const HANDLE_SUFFIX = /^(.*?)\s+# handle (\d+)$/;
const COMMENT_SUFFIX = /^(.*?)\s+comment "((?:[^"\\]|\\.)*)"$/;

/** Parses a rule line (`BODY # handle N`) of chain `chain`; a trailing comment becomes `comment`. */
export function parseRuleLine(line: string, chain: string): Rule {
  const h = HANDLE_SUFFIX.exec(line);
  let body = h === null ? line : h[1];
  const rule: Rule = { kind: "rule", chain, rule: body };
  if (h !== null) rule.handle = Number(h[2]);
  const c = COMMENT_SUFFIX.exec(body);
  if (c !== null) {
    body = c[1];
    rule.rule = body;
    rule.comment = c[2].replace(/\\(.)/g, "$1");
  }
  return rule;
}

const BASE_CHAIN = /^type (\w+) hook (\w+)(?: device \S+)? priority ([^;]+);(?: policy (\w+);)?$/;

/** Set/map header parsed so far. */
interface SetAcc {
  kind: "set" | "map";
  name: string;
  type?: string;
  dataType?: string;
  flags?: SetFlag[];
  timeout?: number;
  comment?: string;
  elements: Element[];
}

function finishSet(acc: SetAcc, line: number): { obj: NftSet | NftMap; elements: Element[] } {
  if (acc.type === undefined) throw new ListParseError(`${acc.kind} ${acc.name} has no type`, line);
  const base = {
    name: acc.name,
    type: acc.type,
    ...(acc.flags !== undefined ? { flags: acc.flags } : {}),
    ...(acc.timeout !== undefined ? { timeout: acc.timeout } : {}),
    ...(acc.comment !== undefined ? { comment: acc.comment } : {}),
  };
  if (acc.kind === "map") {
    if (acc.dataType === undefined) {
      throw new ListParseError(`map ${acc.name} has no data type`, line);
    }
    return { obj: { kind: "map", ...base, dataType: acc.dataType }, elements: acc.elements };
  }
  return { obj: { kind: "set", ...base }, elements: acc.elements };
}

/**
 * Scans `s` for the `}` that brings brace depth `depth` to zero (quotes
 * respected). Returns its index, or -1 and the depth left at the end of `s`.
 */
function closingBrace(s: string, depth: number): { end: number; depth: number } {
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '"') i = readQuoted(s, i).end - 1;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return { end: i, depth: 0 };
  }
  return { end: -1, depth };
}

/**
 * Parses a listing that holds table blocks and returns the one named
 * `family`/`table`, or null when it is not in the listing.
 */
export function parseTableListing(text: string, family: Family, table: string): TableState | null {
  const lines = text.split("\n");
  let state: TableState | null = null;
  let inTarget = false;
  let chain: { chain: Chain; rules: Rule[] } | null = null;
  let set: SetAcc | null = null;
  let skipDepth = 0;

  for (let n = 0; n < lines.length; n++) {
    const line = lines[n].trim();
    if (line === "") continue;
    if (skipDepth > 0) {
      // Inside a block we do not model (flowtable, counter, ...): track braces only.
      skipDepth += (line.match(/{/g)?.length ?? 0) - (line.match(/}/g)?.length ?? 0);
      continue;
    }
    const tableHead = /^table (\w+) (\S+) \{/.exec(line);
    if (tableHead !== null) {
      inTarget = tableHead[1] === family && tableHead[2] === table;
      if (inTarget) {
        state = {
          family,
          name: table,
          chains: new Map(),
          sets: new Map(),
          maps: new Map(),
        };
      }
      continue;
    }
    if (!inTarget || state === null) continue;

    if (chain !== null) {
      if (line === "}") chain = null;
      else chainLine(chain, line);
      continue;
    }

    if (set !== null) {
      if (line === "}") {
        const done = finishSet(set, n);
        if (done.obj.kind === "map") {
          state.maps.set(done.obj.name, { map: done.obj, elements: done.elements });
        } else {
          state.sets.set(done.obj.name, { set: done.obj, elements: done.elements });
        }
        set = null;
      } else n = setLine(set, lines, n);
      continue;
    }

    const chainHead = /^chain (\S+) \{/.exec(line);
    if (chainHead !== null) {
      const c: Chain = { kind: "chain", name: chainHead[1] };
      chain = { chain: c, rules: [] };
      state.chains.set(c.name, chain);
      continue;
    }
    const setHead = /^(set|map) (\S+) \{/.exec(line);
    if (setHead !== null) {
      set = { kind: setHead[1] as "set" | "map", name: setHead[2], elements: [] };
      continue;
    }
    if (line.startsWith("comment ")) {
      state.comment = readQuoted(line, 8).value;
      continue;
    }
    if (line === "}") {
      inTarget = false;
      continue;
    }
    if (/\{(\s*#.*)?$/.test(line)) {
      skipDepth = 1;
      continue;
    }
    // Table-level attributes such as `flags dormant`: not modelled.
  }
  return state;
}

/** One line inside a chain block (not its closing brace): its base hook, comment or a rule. */
function chainLine(chain: { chain: Chain; rules: Rule[] }, line: string): void {
  if (line.startsWith("type ") && BASE_CHAIN.test(line)) {
    const m = BASE_CHAIN.exec(line)!;
    chain.chain.type = m[1] as ChainType;
    chain.chain.hook = m[2] as Hook;
    chain.chain.priority = parsePriority(m[3]);
    if (m[4] !== undefined) chain.chain.policy = m[4] as "accept" | "drop";
  } else if (
    chain.rules.length === 0 && /^comment "/.test(line) && !/# handle \d+$/.test(line)
  ) {
    chain.chain.comment = readQuoted(line, 8).value;
  } else {
    chain.rules.push(parseRuleLine(line, chain.chain.name));
  }
}

/**
 * Line `n` inside a set or map block (not its closing brace); returns the index of the last
 * line it read (elements may span many lines).
 */
function setLine(set: SetAcc, lines: string[], n: number): number {
  const line = lines[n].trim();
  if (line.startsWith("type ") || line.startsWith("typeof ")) {
    const isTypeof = line.startsWith("typeof ");
    const spec = line.slice(isTypeof ? 7 : 5);
    const colon = set.kind === "map" ? spec.lastIndexOf(" : ") : -1;
    const key = colon < 0 ? spec : spec.slice(0, colon);
    set.type = isTypeof ? `typeof ${key}` : key;
    if (colon >= 0) set.dataType = spec.slice(colon + 3);
  } else if (line.startsWith("flags ")) {
    set.flags = line.slice(6).split(",").map((f) => f.trim()) as SetFlag[];
  } else if (line.startsWith("timeout ")) {
    set.timeout = duration(line.slice(8));
  } else if (line.startsWith("comment ")) {
    set.comment = readQuoted(line, 8).value;
  } else if (line.startsWith("elements = {")) {
    // Elements may span many lines (one per element): scan each line once.
    const chunks: string[] = [];
    let rest = line.slice("elements = {".length);
    let scan = closingBrace(rest, 1);
    while (scan.end < 0 && n + 1 < lines.length) {
      chunks.push(rest);
      rest = lines[++n];
      scan = closingBrace(rest, scan.depth);
    }
    if (scan.end < 0) throw new ListParseError(`unterminated elements of ${set.name}`, n);
    chunks.push(rest.slice(0, scan.end));
    const target = set.kind === "map" ? { map: set.name } : { set: set.name };
    for (const el of parseElements(chunks.join("\n"), target)) set.elements.push(el);
  }
  // size, policy, gc-interval, auto-merge, counter: not modelled.
  return n;
}

/** Names of the chains of `family`/`table` in a `list chains` listing, in listing order. */
export function parseChainNames(text: string, family: Family, table: string): string[] {
  const state = parseTableListing(text, family, table);
  return state === null ? [] : [...state.chains.keys()];
}
