/**
 * Reading libnftables' error text, and finding which op of a transaction a
 * record points at (see client.ts for why the location needs confirming).
 *
 * @module
 */
import { renderElement } from "./script.ts";
import type { Element, Operation } from "./types.ts";

/** One error record libnftables printed. */
export interface ErrorRecord {
  /** The message after `Error: `. */
  message: string;
  /** 1-based script line, when the record names one. */
  line?: number;
  /** 0-based column of the first `^` on the caret line, when present. */
  column?: number;
}

/**
 * Splits libnftables' error text into records. Each record is an
 * `Error: ...` line (optionally prefixed `<source>:LINE:COL-COL: `), usually
 * followed by an echoed source line and a caret line.
 */
export function parseErrorText(text: string): ErrorRecord[] {
  const lines = text.split("\n");
  const out: ErrorRecord[] = [];
  const head = /^(?:(.*?):(\d+):(\d+)(?:-\d+)?: )?Error: (.*)$/;
  for (let i = 0; i < lines.length; i++) {
    const m = head.exec(lines[i]);
    if (m === null) continue;
    const rec: ErrorRecord = { message: m[4].trim() };
    if (m[2] !== undefined) rec.line = Number(m[2]);
    // Echoed source line, then the caret line made of spaces, `~` and `^`.
    const caret = lines[i + 2];
    if (caret !== undefined && /^[ ~^]*\^[ ~^]*$/.test(caret)) {
      rec.column = caret.indexOf("^");
      i += 2;
    }
    out.push(rec);
  }
  if (out.length === 0 && text.trim() !== "") out.push({ message: text.trim() });
  return out;
}

/** A script line and the transaction ops [start, end) it renders. */
export interface LineSpan {
  /** First op index. */
  start: number;
  /** One past the last op index. */
  end: number;
}

/**
 * The ops behind each line of `renderScript`'s output: runs of element adds
 * (or deletes) on one set share a line; every other op has its own.
 */
export function scriptLines(ops: readonly Operation[]): LineSpan[] {
  const spans: LineSpan[] = [];
  let i = 0;
  while (i < ops.length) {
    const op = ops[i];
    let j = i + 1;
    if (op.obj.kind === "element" && (op.verb === "add" || op.verb === "delete")) {
      const target = op.obj.set ?? op.obj.map;
      while (j < ops.length) {
        const o = ops[j];
        if (o.verb !== op.verb || o.obj.kind !== "element" || (o.obj.set ?? o.obj.map) !== target) {
          break;
        }
        j++;
      }
    }
    spans.push({ start: i, end: j });
    i = j;
  }
  return spans;
}

/**
 * Which element of a folded element line lies under `column`, given the
 * line's text and its elements. Returns the offset within the line's ops, or
 * undefined when the column is before the first element or past the last.
 */
export function elementAtColumn(
  lineText: string,
  elementTexts: readonly string[],
  column: number,
): number | undefined {
  const open = lineText.indexOf("{ ");
  if (open < 0) return undefined;
  let pos = open + 2;
  for (let k = 0; k < elementTexts.length; k++) {
    const end = pos + elementTexts[k].length;
    if (column >= pos && column < end) return k;
    pos = end + 2; // ", "
  }
  return undefined;
}

/** True when the record names a line of the script. */
function hasLine(rec: ErrorRecord | undefined, spans: readonly LineSpan[]): boolean {
  return rec?.line !== undefined && rec.line >= 1 && rec.line <= spans.length;
}

/**
 * The op an error record points at: its line's op, or on a folded element
 * line the element under the caret. Undefined when the record has no usable
 * line, or its caret is on the command as a whole. `lines` is the rendered
 * script, one entry per span.
 */
export function guessFailedOp(
  ops: readonly Operation[],
  spans: readonly LineSpan[],
  lines: readonly string[],
  rec: ErrorRecord | undefined,
): number | undefined {
  if (rec === undefined) return undefined;
  let lineIdx: number;
  if (hasLine(rec, spans)) lineIdx = rec.line! - 1;
  else if (spans.length === 1) lineIdx = 0;
  else return undefined;
  const span = spans[lineIdx];
  if (span.end - span.start === 1) return span.start;
  if (rec.column === undefined) return undefined;
  const texts = ops.slice(span.start, span.end).map((o) =>
    renderElement(o.obj as Element, o.verb === "add")
  );
  const k = elementAtColumn(lines[lineIdx], texts, rec.column);
  return k === undefined ? undefined : span.start + k;
}

/** The dry runs {@link locateFailedOp} may make (the client's libnftables context). */
export interface FailureProbe {
  /** True when a dry run of these ops fails. */
  fails(ops: readonly Operation[]): Promise<boolean>;
  /** The first error record of a dry run of `script` read as a file (which names lines). */
  dryRunAsFile(script: string): Promise<ErrorRecord | undefined>;
}

/**
 * The index of the first op of `ops` that makes `script` (their rendering)
 * fail, or undefined. The error record's location is a guess that dry runs
 * confirm; without one, or when it is wrong, the lines and then the line's
 * ops are bisected.
 */
export async function locateFailedOp(
  ops: readonly Operation[],
  script: string,
  rec: ErrorRecord | undefined,
  probe: FailureProbe,
): Promise<number | undefined> {
  if (ops.length === 1) return 0;
  const spans = scriptLines(ops);
  const lines = script.split("\n");
  // A rendered op containing a newline would shift lines: trust no line numbers then.
  const linesAgree = lines.length === spans.length + 1;
  if (linesAgree && spans.length > 1 && !hasLine(rec, spans)) {
    // One dry run from a file gets the line number buffer input lacks.
    const again = await probe.dryRunAsFile(script);
    if (hasLine(again, spans)) rec = again;
  }
  const failsUpTo = (end: number) => probe.fails(ops.slice(0, end));
  const guess = linesAgree ? guessFailedOp(ops, spans, lines, rec) : undefined;
  // Locations can be wrong (on 1.0.6, columns within very long element
  // lines are): accept a guess only if dry runs confirm it is the first failure.
  if (guess !== undefined && await firstFailure(guess, guess + 1, ops.length, failsUpTo)) {
    return guess;
  }
  let lineIdx: number | undefined;
  if (spans.length === 1) {
    lineIdx = 0;
  } else if (linesAgree && hasLine(rec, spans)) {
    const l = rec!.line! - 1;
    const first = await firstFailure(spans[l].start, spans[l].end, ops.length, failsUpTo);
    lineIdx = first ? l : await bisect(0, spans.length, (i) => failsUpTo(spans[i].end));
  } else {
    lineIdx = await bisect(0, spans.length, (i) => failsUpTo(spans[i].end));
  }
  if (lineIdx === undefined) return undefined;
  const span = spans[lineIdx];
  if (span.end - span.start === 1) return span.start;
  return await bisect(span.start, span.end, (i) => failsUpTo(i + 1));
}

/** True when the first `end` ops fail a dry run and the first `start` do not. */
async function firstFailure(
  start: number,
  end: number,
  total: number,
  failsUpTo: (end: number) => Promise<boolean>,
): Promise<boolean> {
  if (end < total && !(await failsUpTo(end))) return false;
  return start === 0 || !(await failsUpTo(start));
}

/** The smallest i in [lo, hi) for which `failsAt(i)` holds (it holds for every later i too). */
async function bisect(
  lo: number,
  hi: number,
  failsAt: (i: number) => Promise<boolean>,
): Promise<number | undefined> {
  hi -= 1;
  let confirmed = false;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (await failsAt(mid)) {
      hi = mid;
      confirmed = true;
    } else {
      lo = mid + 1;
    }
  }
  if (!confirmed && !(await failsAt(lo))) return undefined;
  return lo;
}
