import assert from "node:assert/strict";
import { NftablesError } from "./types.ts";

Deno.test("NftablesError: the kind is the errno given, whatever the text says", () => {
  const e = new NftablesError("delete table ip t: whatever the words", undefined, undefined, 2);
  assert.equal(e.errno, 2);
  assert.equal(e.notFound, true);
  assert.equal(e.exists, false);
  assert.equal(new NftablesError("File exists", undefined, undefined, 16).exists, false);
});

Deno.test("NftablesError: without an errno, nft's text is mapped once", () => {
  const e = new NftablesError("Could not process rule: File exists", 3, "add element ...");
  assert.equal(e.errno, 17);
  assert.equal(e.exists, true);
  assert.match(e.message, /failing command: add element/);
  assert.equal(new NftablesError("No such file or directory: chain c").notFound, true);
  assert.equal(new NftablesError("syntax error").errno, undefined);
});
