import assert from "node:assert/strict";
import { checkLookupType, checkWords, lookupTypes } from "./expr.ts";
import { analyseRule, checkComment, KEYWORDS } from "./rule.ts";

const toks = (s: string) => s.split(" ");

Deno.test("lookupTypes reads the (concatenated) key expression in front of @set, vmap and map", () => {
  assert.deepEqual(lookupTypes(toks("ip daddr @s"), 2), ["ipv4_addr"]);
  assert.deepEqual(lookupTypes(toks("ip6 saddr != @s"), 3), ["ipv6_addr"]);
  assert.deepEqual(
    lookupTypes(toks("ip daddr . meta l4proto . th dport vmap @m"), 9),
    ["ipv4_addr", "inet_proto", "inet_service"],
  );
  assert.deepEqual(
    lookupTypes(toks("dnat ip to meta l4proto . th dport . numgen random mod 3 map @m"), 14),
    ["inet_proto", "inet_service", "integer"],
  );
  assert.equal(lookupTypes(toks("update @s"), 1), undefined);
});

Deno.test("a lookup of a set of another type is refused with nft's words", () => {
  checkLookupType({ set: "s", types: ["ipv4_addr"] }, ["ipv4_addr"]);
  checkLookupType({ set: "s" }, ["ipv6_addr"]);
  assert.throws(
    () => checkLookupType({ set: "s", types: ["ipv4_addr"] }, ["ipv4_addr", "inet_service"]),
    /expected IPv4 address, expression has type concatenation of \(IPv4 address, internet network service\)/,
  );
});

Deno.test("unknown words are refused; names, values and strings are not words", () => {
  checkWords("r", toks('iifname != "eth0" ip daddr fd00 : : 1 jump my-chain'), KEYWORDS);
  checkWords(
    "r",
    toks("iifname { eth0 , eth1 } ct state new meta mark set meta mark | 0x4000"),
    KEYWORDS,
  );
  assert.throws(
    () => checkWords("r", toks("frobnicate drop"), KEYWORDS),
    /unexpected "frobnicate"/,
  );
  assert.throws(() => analyseRule("ip daddr 1.2.3.4 counter bogus", undefined), /"bogus"/);
});

Deno.test("comments: 128 bytes of UTF-8 at most", () => {
  checkComment("a".repeat(128));
  checkComment("\u00e9".repeat(64));
  assert.throws(() => checkComment("\u00e9".repeat(65)), /comment too long/);
  assert.throws(() => analyseRule(`accept comment "${"a".repeat(129)}"`, undefined), /too long/);
});
