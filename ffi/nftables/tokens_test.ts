import assert from "node:assert/strict";
import { NftTokenError, ruleWords, tokenizeNft } from "./tokens.ts";

Deno.test("tokenizeNft: words, quoted strings unescaped, the caller's punctuation apart", () => {
  const t = tokenizeNft('ip daddr { 1.2.3.4, fd00::1 } comment "a \\"b\\""', "{},:");
  assert.deepEqual(t.map((x) => x.raw), [
    "ip",
    "daddr",
    "{",
    "1.2.3.4",
    ",",
    "fd00",
    ":",
    ":",
    "1",
    "}",
    "comment",
    '"a \\"b\\""',
  ]);
  assert.equal(t[t.length - 1].text, 'a "b"');
  assert.deepEqual(tokenizeNft("fd00::1 : goto x").map((x) => x.text), [
    "fd00::1",
    ":",
    "goto",
    "x",
  ]);
  assert.throws(() => tokenizeNft('comment "open'), NftTokenError);
});

Deno.test("ruleWords keeps quoted strings and brace groups whole", () => {
  assert.deepEqual(ruleWords('iifname != "a b*" update @s { ip saddr } drop'), [
    "iifname",
    "!=",
    '"a b*"',
    "update",
    "@s",
    "{ ip saddr }",
    "drop",
  ]);
  assert.deepEqual(ruleWords("ip daddr { 1.2.3.4, { 5.6.7.8 } } accept"), [
    "ip",
    "daddr",
    "{ 1.2.3.4, { 5.6.7.8 } }",
    "accept",
  ]);
  assert.throws(() => ruleWords("ip daddr { 1.2.3.4"), NftTokenError);
});
