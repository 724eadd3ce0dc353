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

Deno.test("requestTrim: each request's follow-up runs after the trim, also after a deferred one", async () => {
  const order: string[] = [];
  const trim = () => order.push("trim");
  try {
    let busy = true;
    deferTrimWhile(() => busy);
    requestTrim(trim, () => order.push("a"));
    requestTrim(trim, () => order.push("b")); // merged into the pending request
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(order, [], "nothing while a change waits");
    busy = false;
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(order, ["trim", "a", "b"]);
  } finally {
    deferTrimWhile(undefined);
  }
});
