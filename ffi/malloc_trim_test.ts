import assert from "node:assert/strict";
import { deferTrimWhile, requestTrim } from "./malloc_trim.ts";

Deno.test("requestTrim: runs at once unless a change is waiting, then once when none is", async () => {
  let runs = 0;
  const trim = () => runs++;
  try {
    requestTrim(trim);
    assert.equal(runs, 1);
    let busy = true;
    deferTrimWhile(() => busy);
    requestTrim(trim);
    requestTrim(trim); // one pending request
    assert.equal(runs, 1);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(runs, 1, "still waiting while busy");
    busy = false;
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(runs, 2);
  } finally {
    deferTrimWhile(undefined);
  }
});
