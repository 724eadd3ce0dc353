import assert from "node:assert/strict";
import { lines } from "./lines.ts";

Deno.test("lines: split across chunks, and a last unterminated line", async () => {
  const enc = new TextEncoder();
  const stream = ReadableStream.from(["a\nb", "c\n", "\nd"].map((s) => enc.encode(s)));
  const got: string[] = [];
  for await (const l of lines(stream)) got.push(l);
  assert.deepEqual(got, ["a", "bc", "", "d"]);
});
