import assert from "node:assert/strict";
import {
  ListParseError,
  parseChainNames,
  parseElement,
  parseElements,
  parsePriority,
  parseRuleLine,
  parseTableListing,
} from "./list_parser.ts";

// Verbatim output of libnftables 1.0.6 (`list table`, flags HANDLE | NUMERIC_PRIO).
const LISTING = `table ip other { # handle 3
\tchain x { # handle 1
\t}
}
table ip kp { # handle 7
\tcomment "tbl"
\tset dyn { # handle 3
\t\ttype ipv4_addr
\t\tsize 65535
\t\tflags dynamic,timeout
\t\ttimeout 1h30m
\t\telements = { 198.18.0.1 timeout 10s expires 9s990ms comment "c1", 198.18.0.2 expires 1h29m }
\t}

\tset k { # handle 4
\t\ttype ipv4_addr . inet_service
\t\tflags interval
\t\telements = { 198.18.0.0/24 . 80-90 }
\t}

\tmap svcs { # handle 7
\t\ttype ipv4_addr . inet_proto . inet_service : verdict
\t\tcomment "svc map"
\t\telements = { 198.18.1.2 . udp . 53 : goto svc-a,
\t\t\t     198.18.1.1 . tcp . 80 comment "ns/a:p, {x}" : goto svc-a }
\t}

\tmap dm { # handle 9
\t\ttype ipv4_addr : ipv4_addr . inet_service
\t\telements = { 198.18.1.1 : 198.18.0.5 . 80 }
\t}

\tmap empty { # handle 10
\t\ttype ipv6_addr : verdict
\t}

\tchain f { # handle 1
\t\tcomment "cc"
\t\ttype filter hook output priority -110; policy drop;
\t\tip daddr . tcp dport @k counter packets 0 bytes 0 accept comment "a # handle 3" # handle 6
\t}

\tchain service-ULMVA6XW-ns1/svc1/tcp/p80 { # handle 2
\t\tnumgen random mod 2 vmap { 0 : goto ep-1, 1 : goto ep-1 } comment "x" # handle 7
\t\tupdate @dyn { ip saddr } accept # handle 8
\t}

\tchain ep-1 { # handle 3
\t}
}
`;

Deno.test("parseTableListing: table, chains, rules, sets, maps, elements", () => {
  const s = parseTableListing(LISTING, "ip", "kp");
  assert.ok(s !== null);
  assert.equal(s.comment, "tbl");
  assert.deepEqual([...s.chains.keys()], ["f", "service-ULMVA6XW-ns1/svc1/tcp/p80", "ep-1"]);
  assert.deepEqual(s.chains.get("f")!.chain, {
    kind: "chain",
    name: "f",
    comment: "cc",
    type: "filter",
    hook: "output",
    priority: -110,
    policy: "drop",
  });
  assert.deepEqual(s.chains.get("f")!.rules, [{
    kind: "rule",
    chain: "f",
    rule: "ip daddr . tcp dport @k counter packets 0 bytes 0 accept",
    comment: "a # handle 3",
    handle: 6,
  }]);
  const svc = s.chains.get("service-ULMVA6XW-ns1/svc1/tcp/p80")!;
  assert.deepEqual(svc.rules.map((r) => [r.rule, r.handle, r.comment]), [
    ["numgen random mod 2 vmap { 0 : goto ep-1, 1 : goto ep-1 }", 7, "x"],
    ["update @dyn { ip saddr } accept", 8, undefined],
  ]);
  assert.deepEqual(s.chains.get("ep-1")!.rules, []);

  assert.deepEqual(s.sets.get("dyn")!.set, {
    kind: "set",
    name: "dyn",
    type: "ipv4_addr",
    flags: ["dynamic", "timeout"],
    timeout: 5400,
  });
  assert.deepEqual(s.sets.get("dyn")!.elements, [
    { kind: "element", set: "dyn", key: ["198.18.0.1"], comment: "c1" },
    { kind: "element", set: "dyn", key: ["198.18.0.2"] },
  ]);
  assert.deepEqual(s.sets.get("k")!.elements[0].key, ["198.18.0.0/24", "80-90"]);

  assert.deepEqual(s.maps.get("svcs")!.map, {
    kind: "map",
    name: "svcs",
    type: "ipv4_addr . inet_proto . inet_service",
    dataType: "verdict",
    comment: "svc map",
  });
  assert.deepEqual(s.maps.get("svcs")!.elements, [
    { kind: "element", map: "svcs", key: ["198.18.1.2", "udp", "53"], value: ["goto svc-a"] },
    {
      kind: "element",
      map: "svcs",
      key: ["198.18.1.1", "tcp", "80"],
      value: ["goto svc-a"],
      comment: "ns/a:p, {x}",
    },
  ]);
  assert.deepEqual(s.maps.get("dm")!.elements[0].value, ["198.18.0.5", "80"]);
  assert.deepEqual(s.maps.get("empty")!.map.dataType, "verdict");
  assert.deepEqual(s.maps.get("empty")!.elements, []);
});

Deno.test("parseTableListing: another table, or none, gives null", () => {
  assert.equal(parseTableListing(LISTING, "ip6", "kp"), null);
  assert.equal(parseTableListing(LISTING, "ip", "nope"), null);
  assert.equal(parseTableListing("", "ip", "kp"), null);
  const other = parseTableListing(LISTING, "ip", "other");
  assert.deepEqual([...other!.chains.keys()], ["x"]);
});

Deno.test("parseTableListing: blocks we do not model are skipped", () => {
  const text = `table inet t { # handle 1
\tcounter c1 { # handle 2
\t\tpackets 0 bytes 0
\t}

\tchain c { # handle 3
\t\ttype filter hook input priority filter; policy accept;
\t}
}
`;
  const s = parseTableListing(text, "inet", "t")!;
  assert.deepEqual([...s.chains.keys()], ["c"]);
  assert.equal(s.chains.get("c")!.chain.priority, 0);
});

Deno.test("parseTableListing: IPv6 elements keep their colons", () => {
  const text = `table ip6 t {
\tmap m {
\t\ttype ipv6_addr . inet_proto . inet_service : ipv6_addr . inet_service
\t\telements = { 2001:db8::1 . tcp . 80 : 2001:db8::a . 8080 }
\t}
}
`;
  const m = parseTableListing(text, "ip6", "t")!.maps.get("m")!;
  assert.equal(m.map.type, "ipv6_addr . inet_proto . inet_service");
  assert.equal(m.map.dataType, "ipv6_addr . inet_service");
  assert.deepEqual(m.elements[0].key, ["2001:db8::1", "tcp", "80"]);
  assert.deepEqual(m.elements[0].value, ["2001:db8::a", "8080"]);
});

Deno.test("parseTableListing: many element lines parse in linear time", () => {
  const n = 50000;
  const els = Array.from(
    { length: n },
    (_, i) => `198.18.${i >> 8}.${i & 255} . tcp . 80 : goto svc`,
  );
  const text =
    `table ip t {\n\tmap m {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n` +
    `\t\telements = { ${els.join(",\n\t\t\t     ")} }\n\t}\n}\n`;
  const t0 = performance.now();
  const m = parseTableListing(text, "ip", "t")!.maps.get("m")!;
  const ms = performance.now() - t0;
  assert.equal(m.elements.length, n);
  assert.deepEqual(m.elements[n - 1].key, ["198.18.195.79", "tcp", "80"]);
  assert.ok(ms < 2000, `parsing ${n} elements took ${ms} ms`);
});

Deno.test("parseChainNames: picks the table's chains from a `list chains` listing", () => {
  const text = `table ip a {
\tchain x { # handle 1
\t\ttype nat hook prerouting priority -100; policy accept;
\t}
}
table ip b {
\tchain y { # handle 1
\t}
\tchain z { # handle 2
\t}
}
`;
  assert.deepEqual(parseChainNames(text, "ip", "b"), ["y", "z"]);
  assert.deepEqual(parseChainNames(text, "ip", "c"), []);
});

Deno.test("parseTableListing: a set timeout nft would not print is a ListParseError", () => {
  const bad = LISTING.replace("timeout 1h30m", "timeout ten");
  assert.throws(() => parseTableListing(bad, "ip", "kp"), ListParseError);
});

Deno.test("parsePriority: numbers and symbolic names", () => {
  assert.equal(parsePriority("-100"), -100);
  assert.equal(parsePriority("dstnat"), -100);
  assert.equal(parsePriority("dstnat - 10"), -110);
  assert.equal(parsePriority("srcnat + 5"), 105);
  assert.throws(() => parsePriority("bogus"), ListParseError);
});

Deno.test("parseElement: attributes and values", () => {
  assert.deepEqual(
    parseElement('198.18.0.1 counter packets 3 bytes 180 comment "c"', { set: "s" }),
    {
      kind: "element",
      set: "s",
      key: ["198.18.0.1"],
      comment: "c",
    },
  );
  assert.deepEqual(parseElement("198.18.0.1 : jump x", { map: "m" }).value, ["jump x"]);
  assert.deepEqual(parseElement('"eth0" . 80', { set: "s" }).key, ['"eth0"', "80"]);
  assert.throws(
    () => parseElement(`198.18.0.1 comment "c" weird`, { set: "s" }),
    /unexpected "weird"/,
  );
  assert.deepEqual(parseElements(" ", { set: "s" }), []);
});

Deno.test("parseRuleLine: handle and trailing comment", () => {
  assert.deepEqual(parseRuleLine("jump services # handle 12", "c"), {
    kind: "rule",
    chain: "c",
    rule: "jump services",
    handle: 12,
  });
  assert.deepEqual(parseRuleLine('accept comment "say \\"hi\\"" # handle 2', "c"), {
    kind: "rule",
    chain: "c",
    rule: "accept",
    comment: 'say "hi"',
    handle: 2,
  });
});
