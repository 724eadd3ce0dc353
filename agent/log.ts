/**
 * Small klog-compatible logger.
 *
 * Text format (default) mirrors klog's header so existing log tooling keeps working:
 * `I1123 00:27:14.123456    1234 informers] "message" key="value"`.
 * JSON format (`--logging-format=json`) writes one object per line:
 * `{"ts":1700698034123.456,"v":0,"msg":"message","key":"value"}`.
 * Every line goes to stderr, as klog's do (kube-proxy's default); stdout carries only what a
 * command prints as its output (--dry-run transactions, trace, explain, --version, --help).
 * kube-proxy's logging flags change that ({@link createSink}): --log-text-split-stream sends
 * info lines to stdout, --logtostderr=false --log-file=F writes to F.
 * @module
 */

/** Output format of log lines. */
export type LogFormat = "text" | "json";

/** Structured key/value pairs attached to a log line. */
export type LogFields = Record<string, unknown>;

/** A sink receives finished lines (info to `out`, the rest to `err`); the default writes both to stderr. */
export interface LogSink {
  /** Writes an informational line. */
  out(line: string): void;
  /** Writes a warning or error line. */
  err(line: string): void;
}

/** Options for {@link Logger}. */
export interface LoggerOptions {
  /** Line format; default "text". */
  format?: LogFormat;
  /** Verbosity: `info(.., level)` lines with level > verbosity are dropped. Default 0. */
  verbosity?: number;
  /** Short component name shown where klog shows file:line. Default "kube-nft-proxy". */
  component?: string;
  /** Where lines go; default stderr. */
  sink?: LogSink;
  /** Clock, for tests. */
  now?: () => Date;
}

/** Verbosity-gated view returned by {@link Logger.v}. */
export interface VerboseLogger {
  /** Logs an informational message at the gated level. */
  info(msg: string, fields?: LogFields): void;
}

const encoder = new TextEncoder();

/** Default sink: synchronous writes so lines are never lost on exit; all to stderr, as klog. */
export const stdSink: LogSink = {
  out(line) {
    Deno.stderr.writeSync(encoder.encode(line + "\n"));
  },
  err(line) {
    Deno.stderr.writeSync(encoder.encode(line + "\n"));
  },
};

/** Where lines go, as kube-proxy's logging flags choose. */
export interface SinkOptions {
  /** --log-*-split-stream: info lines to stdout, warnings and errors to stderr. */
  splitStream?: boolean;
  /** klog's --log-file (with --logtostderr=false): append every line to this file instead. */
  file?: string;
  /** klog's --alsologtostderr: with `file`, every line to stderr as well. */
  alsoStderr?: boolean;
}

/**
 * The sink for `opts`: {@link stdSink} (all to stderr) unless split stream or a log file is
 * asked for. The file is opened for appending now; a failure to open it throws.
 */
export function createSink(opts: SinkOptions = {}): LogSink {
  const write = (f: { writeSync(b: Uint8Array): number }) => (line: string) => {
    f.writeSync(encoder.encode(line + "\n"));
  };
  if (opts.file) {
    const file = Deno.openSync(opts.file, { append: true, create: true });
    const toFile = write(file);
    const toErr = write(Deno.stderr);
    const both = (l: string) => {
      toFile(l);
      if (opts.alsoStderr) toErr(l);
    };
    return { out: both, err: both };
  }
  if (opts.splitStream) return { out: write(Deno.stdout), err: write(Deno.stderr) };
  return stdSink;
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

/** Formats a klog value: strings quoted, errors by message, objects as JSON. */
export function formatValue(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (v instanceof Error) return JSON.stringify(v.message);
  if (v === undefined) return "<undefined>";
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Date) return JSON.stringify(v.toISOString());
  if (v instanceof Set) return safeJson([...v]);
  if (v instanceof Map) return safeJson(Object.fromEntries(v));
  return safeJson(v);
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return JSON.stringify(String(v));
  }
}

function jsonValue(v: unknown): unknown {
  if (v instanceof Error) return v.message;
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Set) return [...v];
  if (v instanceof Map) return Object.fromEntries(v);
  return v;
}

/** klog-style leveled, structured logger. */
export class Logger {
  /** Current verbosity (klog -v). */
  verbosity: number;
  /** Current output format. */
  format: LogFormat;
  readonly #component: string;
  readonly #sink: LogSink;
  readonly #now: () => Date;
  readonly #pid: string;

  /** Creates a logger; see {@link LoggerOptions}. */
  constructor(opts: LoggerOptions = {}) {
    this.verbosity = opts.verbosity ?? 0;
    this.format = opts.format ?? "text";
    this.#component = opts.component ?? "kube-nft-proxy";
    this.#sink = opts.sink ?? stdSink;
    this.#now = opts.now ?? (() => new Date());
    this.#pid = String(Deno.pid).padStart(7, " ");
  }

  /** Returns a logger for `level`, or undefined when that level is disabled (`log.v(2)?.info(..)`). */
  v(level: number): VerboseLogger | undefined {
    if (level > this.verbosity) return undefined;
    return { info: (msg, fields) => this.#write("I", level, msg, fields) };
  }

  /** True when lines at `level` are written; use to skip building expensive fields. */
  enabled(level: number): boolean {
    return level <= this.verbosity;
  }

  /** Logs an informational message, dropped when `level` exceeds the verbosity. */
  info(msg: string, fields?: LogFields, level = 0): void {
    if (level > this.verbosity) return;
    this.#write("I", level, msg, fields);
  }

  /** Logs a warning (always written, to stderr). */
  warn(msg: string, fields?: LogFields): void {
    this.#write("W", 0, msg, fields);
  }

  /** Logs an error (always written, to stderr); `err` is shown as the `err` field. */
  error(msg: string, err?: unknown, fields?: LogFields): void {
    const all = err === undefined ? fields : { err, ...fields };
    this.#write("E", 0, msg, all);
  }

  /** Returns a logger with the same settings but another component name. */
  child(component: string): Logger {
    return new Logger({
      format: this.format,
      verbosity: this.verbosity,
      component,
      sink: this.#sink,
      now: this.#now,
    });
  }

  #write(sev: "I" | "W" | "E", level: number, msg: string, fields?: LogFields): void {
    const now = this.#now();
    const line = this.format === "json"
      ? this.#json(sev, level, msg, fields, now)
      : this.#text(sev, msg, fields, now);
    if (sev === "I") this.#sink.out(line);
    else this.#sink.err(line);
  }

  #text(sev: string, msg: string, fields: LogFields | undefined, d: Date): string {
    // klog uses local time; we use UTC so lines from many nodes compare directly.
    const micros = d.getUTCMilliseconds() * 1000;
    let s = `${sev}${pad(d.getUTCMonth() + 1, 2)}${pad(d.getUTCDate(), 2)} ` +
      `${pad(d.getUTCHours(), 2)}:${pad(d.getUTCMinutes(), 2)}:${pad(d.getUTCSeconds(), 2)}.` +
      `${pad(micros, 6)} ${this.#pid} ${this.#component}] ${JSON.stringify(msg)}`;
    if (fields) {
      for (const k in fields) s += ` ${k}=${formatValue(fields[k])}`;
    }
    return s;
  }

  #json(sev: string, level: number, msg: string, fields: LogFields | undefined, d: Date): string {
    const o: Record<string, unknown> = { ts: d.getTime(), caller: this.#component };
    o.v = level;
    o.msg = msg;
    if (sev !== "I") o.level = sev === "E" ? "error" : "warning";
    if (fields) {
      for (const k in fields) o[k] = jsonValue(fields[k]);
    }
    return safeJson(o);
  }
}
