import assert from "node:assert/strict";
import { isNpmTypeRef, isSourceModule, parseFindings } from "./doc_lint.ts";

Deno.test("doc lint: source modules are the floors' non-test files and main.ts", () => {
  assert.equal(isSourceModule("main.ts"), true);
  assert.equal(isSourceModule("net/ip.ts"), true);
  assert.equal(isSourceModule("agent/kube/slim.ts"), true);
  assert.equal(isSourceModule("net/ip_test.ts"), false);
  assert.equal(isSourceModule("proxier/model_testing.ts"), false);
  assert.equal(isSourceModule("proxier/nftables/testing.ts"), false);
  assert.equal(isSourceModule("proxier/testdata/cluster_state.ts"), false);
  assert.equal(isSourceModule("tests/topology.ts"), false);
  assert.equal(isSourceModule("scripts/doc_lint.ts"), false);
});

Deno.test("doc lint: findings are read from deno doc's output; npm type references pass", () => {
  const text = [
    "error[missing-jsdoc]: exported symbol is missing JSDoc documentation",
    "  --> /r/net/ip.ts:19:3",
    "   | ",
    "error[private-type-ref]: public type 'x' references private type 'KubeConfig'",
    "  --> /r/agent/a.ts:5:1",
    "error[private-type-ref]: public type 'y' references private type 'Json'",
    "  --> /r/agent/b.ts:7:1",
  ].join("\n");
  const all = parseFindings(text, "/r");
  assert.deepEqual(all.map((f) => `${f.where} ${f.code}`), [
    "net/ip.ts:19:3 missing-jsdoc",
    "agent/a.ts:5:1 private-type-ref",
    "agent/b.ts:7:1 private-type-ref",
  ]);
  assert.deepEqual(all.filter((f) => !isNpmTypeRef(f)).map((f) => f.where), [
    "net/ip.ts:19:3",
    "agent/b.ts:7:1",
  ]);
});
