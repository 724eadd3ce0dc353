import assert from "node:assert/strict";
import { scriptRoute, writeRoute } from "./route.ts";
import { type Operation, Transaction } from "./types.ts";

const elements: Operation[] = new Transaction()
  .add({ kind: "element", map: "m", key: ["198.18.0.1", "tcp", "80"], value: ["goto c"] })
  .delete({ kind: "element", set: "s", key: ["198.18.0.2"] }).ops;
const mixed: Operation[] = new Transaction()
  .add({ kind: "chain", name: "c" })
  .add({ kind: "element", set: "s", key: ["198.18.0.3"] }).ops;
const tableDelete: Operation[] = new Transaction().delete({ kind: "table" }).ops;
const on = { rawElements: true, dryRun: false };

Deno.test("route elements: element-only, committed, raw writes on", () => {
  assert.equal(writeRoute(elements, on), "elements");
});

Deno.test("route script: any other object, a dry run, or raw writes off", () => {
  assert.equal(writeRoute(mixed, on), "script");
  assert.equal(writeRoute(tableDelete, on), "script");
  assert.equal(writeRoute(elements, { rawElements: true, dryRun: true }), "script");
  assert.equal(writeRoute(elements, { rawElements: false, dryRun: false }), "script");
  assert.deepEqual(scriptRoute(mixed, false, undefined), { via: "libnftables" });
  assert.deepEqual(scriptRoute(tableDelete, true, undefined), { via: "libnftables" });
});

Deno.test("route hazard: a lone committed table delete goes over plain netlink", () => {
  assert.deepEqual(scriptRoute(tableDelete, false, "bad set"), { via: "netlink-table-delete" });
});

Deno.test("route hazard: anything else is refused with the reason", () => {
  assert.deepEqual(scriptRoute(mixed, false, "bad set"), { via: "refused", why: "bad set" });
  assert.deepEqual(scriptRoute(elements, false, "bad set"), { via: "refused", why: "bad set" });
  assert.deepEqual(scriptRoute(tableDelete, true, "bad set"), { via: "refused", why: "bad set" });
  const two = new Transaction().delete({ kind: "table" }).add({ kind: "table" }).ops;
  assert.deepEqual(scriptRoute(two, false, "bad set"), { via: "refused", why: "bad set" });
});
