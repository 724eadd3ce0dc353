/**
 * Durations in the two syntaxes we read and write: Go's (`time.ParseDuration`, used by
 * kube-proxy's flags and config file; in milliseconds here) and nft's (set timeouts in a
 * listing; in seconds).
 *
 * @module
 */

const GO_UNITS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Parses a Go duration ("1s", "500ms", "1h30m", "1.5h", "0") into milliseconds.
 * Throws a plain Error describing the accepted syntax.
 */
export function parseGoDuration(text: string): number {
  const s = text.trim();
  const bad = () =>
    new Error(`invalid duration "${text}": use Go syntax such as 500ms, 30s, 1m30s or 1h`);
  if (s === "0" || s === "+0" || s === "-0") return 0;
  const m = /^([+-]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+)$/.exec(s);
  if (!m) throw bad();
  let total = 0;
  for (const part of m[2].matchAll(/(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g)) {
    total += Number(part[1]) * GO_UNITS[part[2]];
  }
  return m[1] === "-" ? -total : total;
}

/** Formats milliseconds as a Go-style duration ("1h30m0s", "500ms"), for docs and logs. */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return "0s";
  if (Math.abs(ms) < 1000) return `${ms}ms`;
  const sign = ms < 0 ? "-" : "";
  let rest = Math.abs(ms) / 1000;
  const h = Math.floor(rest / 3600);
  rest -= h * 3600;
  const m = Math.floor(rest / 60);
  rest -= m * 60;
  const sec = Number(rest.toFixed(3));
  return sign + (h ? `${h}h${m}m${sec}s` : m ? `${m}m${sec}s` : `${sec}s`);
}

/** nft's units, largest first (as it prints them), in seconds. */
const NFT_UNITS: readonly (readonly [string, number])[] = [
  ["d", 86400],
  ["h", 3600],
  ["m", 60],
  ["s", 1],
  ["ms", 0.001],
];
const NFT_UNIT = Object.fromEntries(NFT_UNITS);

/**
 * Parses an nft duration such as `30s`, `1h30m`, `2d`, `500ms` to seconds.
 * Throws a plain Error naming the text when it is not one.
 */
export function parseNftDuration(text: string): number {
  const re = /(\d+)(ms|d|h|m|s)/y;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    total += Number(m[1]) * NFT_UNIT[m[2]];
    matched = re.lastIndex;
  }
  if (matched === 0 || matched !== text.length) {
    throw new Error(`cannot parse duration "${text}"`);
  }
  return Math.round(total * 1000) / 1000;
}

/** Seconds as nft prints durations (whole seconds), e.g. 10800 -> "3h", 90 -> "1m30s". */
export function formatNftDuration(seconds: number): string {
  let s = Math.floor(seconds);
  if (s === 0) return "0s";
  let out = "";
  for (const [unit, n] of NFT_UNITS) {
    if (n < 1) break;
    if (s >= n) {
      out += `${Math.floor(s / n)}${unit}`;
      s %= n;
    }
  }
  return out;
}
