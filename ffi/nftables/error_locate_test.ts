import assert from "node:assert/strict";
import { type ErrorRecord, type FailureProbe, locateFailedOp } from "./error_locate.ts";
import { renderScript } from "./script.ts";
import { type Operation, Transaction } from "./types.ts";

/** A transaction of chains and elements: two chain lines, then element lines. */
function ops(): Operation[] {
  const tx = new Transaction().add({ kind: "chain", name: "a" }).add({ kind: "chain", name: "b" });
  for (let i = 1; i <= 20; i++) tx.add({ kind: "element", set: "s", key: [`198.18.0.${i}`] });
  return tx.ops;
}

/** Dry runs that fail once op `bad` is included; counts them. */
function probe(bad: number, fileRec?: ErrorRecord): FailureProbe & { runs: number } {
  const p = {
    runs: 0,
    fails: (o: readonly Operation[]) => {
      p.runs++;
      return Promise.resolve(o.length > bad);
    },
    dryRunAsFile: () => Promise.resolve(fileRec),
  };
  return p;
}

Deno.test("locateFailedOp: bisects lines, then the failing line's ops", async () => {
  const o = ops();
  const script = renderScript("ip", "t", o);
  for (const bad of [0, 1, 2, 9, 21]) {
    assert.equal(await locateFailedOp(o, script, { message: "x" }, probe(bad)), bad);
  }
});

Deno.test("locateFailedOp: a confirmed guess costs two dry runs; a wrong one is not kept", async () => {
  const o = ops();
  const script = renderScript("ip", "t", o);
  const p = probe(1);
  assert.equal(await locateFailedOp(o, script, { message: "x", line: 2 }, p), 1);
  assert.equal(p.runs, 2);
  assert.equal(await locateFailedOp(o, script, { message: "x", line: 1 }, probe(1)), 1);
});

Deno.test("locateFailedOp: nothing fails alone, or a single op", async () => {
  const o = ops();
  const script = renderScript("ip", "t", o);
  assert.equal(await locateFailedOp(o, script, undefined, probe(99)), undefined);
  assert.equal(await locateFailedOp(o.slice(0, 1), "", undefined, probe(99)), 0);
});
