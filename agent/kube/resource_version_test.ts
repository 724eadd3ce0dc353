import assert from "node:assert/strict";
import { ApiStatusError } from "./api_fetch.ts";
import { tooLargeResourceVersion, VersionTrail } from "./resource_version.ts";

Deno.test("VersionTrail reports a version going back, once, and compares only numbers", () => {
  const seen: unknown[] = [];
  const t = new VersionTrail((f) => seen.push(f));
  assert.equal(t.note("5", "list"), undefined);
  assert.equal(t.note("7", "watch event"), undefined);
  assert.equal(t.note("3", "list"), 7);
  assert.equal(t.note("4", "watch event"), undefined, "following the server from 3 on");
  assert.equal(t.note("abc", "list"), undefined, "an opaque version is not compared");
  assert.deepEqual(seen, [{ in: "list", resourceVersion: "3", previously: 7 }]);
});

Deno.test("tooLargeResourceVersion knows the watch cache's 504", () => {
  const msg = "Too large resource version: 5, current: 2";
  assert.equal(tooLargeResourceVersion(new ApiStatusError(504, msg, "Timeout")), true);
  assert.equal(tooLargeResourceVersion(new ApiStatusError(504, "gateway timeout")), false);
  assert.equal(tooLargeResourceVersion(new ApiStatusError(410, "too old resource version")), false);
});
