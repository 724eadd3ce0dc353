import assert from "node:assert/strict";
import { contextFdHazard, FD_SETSIZE } from "./context_sockets.ts";

Deno.test("contextFdHazard: libnftables' select(2) cannot take a descriptor past FD_SETSIZE", () => {
  assert.equal(contextFdHazard(3), undefined);
  assert.equal(contextFdHazard(FD_SETSIZE - 1), undefined);
  const why = contextFdHazard(FD_SETSIZE);
  assert.ok(why !== undefined);
  assert.match(why, /descriptor 1024: .*select\(2\), which aborts the process/);
});
