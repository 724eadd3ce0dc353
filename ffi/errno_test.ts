import assert from "node:assert/strict";
import { EEXIST, ENOENT, errnoName, errnoOfNftMessage } from "./errno.ts";

Deno.test("errnoOfNftMessage: libnftables' text maps to the kernel's errno", () => {
  assert.equal(errnoOfNftMessage("Could not process rule: No such file or directory"), ENOENT);
  assert.equal(errnoOfNftMessage("set ip t s does not exist"), ENOENT);
  assert.equal(errnoOfNftMessage("Could not process rule: File exists"), EEXIST);
  assert.equal(errnoOfNftMessage("Could not process rule: Device or resource busy"), 16);
  assert.equal(errnoOfNftMessage("Could not process rule: Too many links"), 31);
  assert.equal(errnoOfNftMessage("syntax error, unexpected string"), undefined);
});

Deno.test("errnoName: known names, else the number", () => {
  assert.equal(errnoName(2), "ENOENT");
  assert.equal(errnoName(30), "EROFS");
  assert.equal(errnoName(4242), "errno 4242");
});
