/**
 * The one tokenizer of nft text, shared by the in-memory nftables (rule
 * bodies), the listing parser (elements) and the packet tracer (rules as
 * listed). Words split at whitespace and at the punctuation the caller names;
 * a double-quoted string is one token, its value unescaped.
 *
 * @module
 */

/** One token and where it stands in the text. */
export interface NftToken {
  /** The token as written (a quoted string with its quotes). */
  raw: string;
  /** The text: a quoted string's value, unescaped; otherwise `raw`. */
  text: string;
  /** True for a quoted string. */
  quoted: boolean;
  /** Offsets of `raw` in the text: [start, end). */
  start: number;
  /** One past the token's last character. */
  end: number;
}

/** A string that does not end. */
export class NftTokenError extends Error {}

/** Reads the double-quoted string at `s[i]`: its unescaped value and the index after it. */
export function readQuoted(s: string, i: number): { value: string; end: number } {
  let value = "";
  let j = i + 1;
  while (j < s.length && s[j] !== '"') {
    if (s[j] === "\\" && j + 1 < s.length) j++;
    value += s[j];
    j++;
  }
  if (j >= s.length) throw new NftTokenError(`unterminated string in: ${s}`);
  return { value, end: j + 1 };
}

const SPACE = " \t\n\r";

/**
 * Splits `s` into tokens. Each character of `punct` is a token of its own
 * (the in-memory nftables passes `{}(),:;`; the listing parser none).
 * Throws {@link NftTokenError} on an unterminated string.
 */
export function tokenizeNft(s: string, punct = ""): NftToken[] {
  const out: NftToken[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (SPACE.includes(c)) {
      i++;
    } else if (c === '"') {
      const q = readQuoted(s, i);
      out.push({ raw: s.slice(i, q.end), text: q.value, quoted: true, start: i, end: q.end });
      i = q.end;
    } else if (punct.includes(c)) {
      out.push({ raw: c, text: c, quoted: false, start: i, end: i + 1 });
      i++;
    } else {
      let j = i;
      while (j < s.length && !SPACE.includes(s[j]) && s[j] !== '"' && !punct.includes(s[j])) j++;
      out.push({ raw: s.slice(i, j), text: s.slice(i, j), quoted: false, start: i, end: j });
      i = j;
    }
  }
  return out;
}

/**
 * Splits a rule as the tracer reads it: words and quoted strings, with each
 * `{ ... }` group (anonymous sets, dynset keys) kept whole as written.
 */
export function ruleWords(rule: string): string[] {
  const toks = tokenizeNft(rule, "{}");
  const out: string[] = [];
  for (let i = 0; i < toks.length; i++) {
    if (toks[i].raw !== "{") {
      out.push(toks[i].raw);
      continue;
    }
    let depth = 0;
    let j = i;
    for (; j < toks.length; j++) {
      if (toks[j].raw === "{") depth++;
      else if (toks[j].raw === "}" && --depth === 0) break;
    }
    if (j >= toks.length) throw new NftTokenError(`unterminated { in rule: ${rule}`);
    out.push(rule.slice(toks[i].start, toks[j].end));
    i = j;
  }
  return out;
}
