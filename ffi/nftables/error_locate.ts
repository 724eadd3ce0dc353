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
  start: number;
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
export function hasLine(rec: ErrorRecord | undefined, spans: readonly LineSpan[]): boolean {
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
