import assert from "node:assert/strict";
import {
  elementAtColumn,
  guessFailedOp,
  openNftables,
  parseErrorText,
  scriptLines,
} from "./client.ts";
import { renderElement, renderScript } from "./script.ts";
import { type Element, type Family, Transaction } from "./types.ts";

// Verbatim error text of libnftables 1.0.6 for buffer input: it echoes the
// buffer's FIRST line, with the caret columns of the failing line.
const KERNEL_ERROR = `Error: Could not process rule: No such file or directory
add table ip kt
                      ^^^^^^^^^^
`;
const TWO_ERRORS = `Error: syntax error, unexpected quoted string, expecting string
add table ip kv { comment "tbl" ; }
                ^^^^^^^^
Error: datatype mismatch, expected IPv4 address
add table ip kv { comment "tbl" ; }
                 ~~~~~~~~ ^^
`;

Deno.test("parseErrorText: 1.0.6 buffer errors have a column but no line", () => {
  assert.deepEqual(parseErrorText(KERNEL_ERROR), [
    { message: "Could not process rule: No such file or directory", column: 22 },
  ]);
  assert.deepEqual(parseErrorText(TWO_ERRORS), [
    { message: "syntax error, unexpected quoted string, expecting string", column: 16 },
    { message: "datatype mismatch, expected IPv4 address", column: 26 },
  ]);
});

Deno.test("parseErrorText: file-style locations give the line", () => {
  const text = `/tmp/x.nft:16:29-35: Error: syntax error, unexpected missing, expecting '{'
add rule ip kp nat-pre goto missing
                            ^^^^^^^
`;
  assert.deepEqual(parseErrorText(text), [
    { message: "syntax error, unexpected missing, expecting '{'", line: 16, column: 28 },
  ]);
});

Deno.test("parseErrorText: unrecognised text is kept whole", () => {
  assert.deepEqual(parseErrorText("something odd\n"), [{ message: "something odd" }]);
  assert.deepEqual(parseErrorText(""), []);
});

function tx(): Transaction {
  return new Transaction()
    .add({ kind: "table" })
    .add({ kind: "chain", name: "c" })
    .add({ kind: "element", map: "m", key: ["198.18.0.1", "tcp", "80"], value: ["goto c"] })
    .add({ kind: "element", map: "m", key: ["198.18.0.2", "tcp", "80"], value: ["goto c"] })
    .add({ kind: "element", set: "s", key: ["198.18.0.3"] })
    .delete({ kind: "element", set: "s", key: ["198.18.0.4"] })
    .delete({ kind: "element", set: "s", key: ["198.18.0.5"] })
    .create({ kind: "element", set: "s", key: ["198.18.0.6"] })
    .create({ kind: "element", set: "s", key: ["198.18.0.7"] })
    .add({ kind: "rule", chain: "c", rule: "accept" });
}

Deno.test("scriptLines: one span per line renderScript prints", () => {
  const ops = tx().ops;
  const spans = scriptLines(ops);
  assert.deepEqual(spans, [
    { start: 0, end: 1 },
    { start: 1, end: 2 },
    { start: 2, end: 4 },
    { start: 4, end: 5 },
    { start: 5, end: 7 },
    { start: 7, end: 8 },
    { start: 8, end: 9 },
    { start: 9, end: 10 },
  ]);
  const lines = renderScript("ip", "t", ops).trimEnd().split("\n");
  assert.equal(lines.length, spans.length);
  // Each span renders, on its own, to exactly its line.
  spans.forEach((sp, i) => {
    assert.equal(renderScript("ip", "t", ops.slice(sp.start, sp.end)), lines[i] + "\n");
  });
  assert.deepEqual(scriptLines([]), []);
});

Deno.test("elementAtColumn: maps a caret column to the element under it", () => {
  const els: Element[] = [0, 1, 2].map((i) => ({
    kind: "element",
    map: "m",
    key: [`198.18.1.${i + 1}`, "tcp", "80"],
    value: [i === 2 ? "goto nowhere" : "goto svc"],
    comment: i === 1 ? "a, b" : undefined,
  }));
  const line = renderScript(
    "ip",
    "t",
    els.map((obj) => ({ verb: "add" as const, obj })),
  ).trimEnd();
  const texts = els.map((e) => renderElement(e, true));
  for (let k = 0; k < 3; k++) {
    const start = line.indexOf(texts[k]);
    assert.equal(elementAtColumn(line, texts, start), k);
    assert.equal(elementAtColumn(line, texts, start + texts[k].length - 1), k);
  }
  // The caret on `goto nowhere` (what the kernel points at) lands on element 2.
  assert.equal(elementAtColumn(line, texts, line.indexOf("goto nowhere")), 2);
  assert.equal(elementAtColumn(line, texts, 0), undefined);
  assert.equal(elementAtColumn(line, texts, line.length + 5), undefined);
});

Deno.test("openNftables: bad family or table name is refused before touching the library", () => {
  assert.throws(() => openNftables("arp" as Family, "t"), /unsupported nftables family "arp"/);
  assert.throws(() => openNftables("ip", "bad name"), /invalid nftables table name "bad name"/);
  assert.throws(() => openNftables("ip", ""), TypeError);
});

Deno.test("guessFailedOp: line number, then caret column within a folded line", () => {
  const ops = tx().ops;
  const spans = scriptLines(ops);
  const lines = renderScript("ip", "t", ops).split("\n");
  // A single-op line: the line alone decides.
  assert.equal(guessFailedOp(ops, spans, lines, { message: "x", line: 8, column: 3 }), 9);
  // A folded line: the element under the caret.
  const col = lines[2].indexOf("198.18.0.2");
  assert.equal(guessFailedOp(ops, spans, lines, { message: "x", line: 3, column: col }), 3);
  // Caret on the command word, no caret, no line: no guess (the client bisects).
  assert.equal(guessFailedOp(ops, spans, lines, { message: "x", line: 3, column: 0 }), undefined);
  assert.equal(guessFailedOp(ops, spans, lines, { message: "x", line: 3 }), undefined);
  assert.equal(guessFailedOp(ops, spans, lines, { message: "x", column: col }), undefined);
  assert.equal(guessFailedOp(ops, spans, lines, { message: "x", line: 99 }), undefined);
  assert.equal(guessFailedOp(ops, spans, lines, undefined), undefined);
});
