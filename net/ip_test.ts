import assert from "node:assert/strict";
import {
  canonicalCIDR,
  canonicalIP,
  canonicalText,
  cidrContains,
  compareIP,
  formatIP,
  ipFamily,
  parseCIDR,
  parseIP,
} from "./ip.ts";

Deno.test("canonicalIP: valid addresses", () => {
  const cases: [string, string][] = [
    ["198.18.0.1", "198.18.0.1"],
    ["0.0.0.0", "0.0.0.0"],
    ["255.255.255.255", "255.255.255.255"],
    ["198.018.000.001", "198.18.0.1"], // sloppy: leading zeros read as decimal
    ["2001:db8::1", "2001:db8::1"],
    ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // first of equal runs
    ["2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"], // longest run, single zero kept
    ["2001:db8:1:1:1:1:1:0", "2001:db8:1:1:1:1:1:0"],
    ["::", "::"],
    ["::1", "::1"],
    ["1::", "1::"],
    ["::ffff:198.18.0.1", "::ffff:c612:1"],
    ["2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"],
  ];
  for (const [input, want] of cases) assert.equal(canonicalIP(input), want, input);
});

Deno.test("canonicalIP: invalid addresses", () => {
  for (
    const bad of [
      "",
      "198.18.0",
      "198.18.0.1.2",
      "198.18.0.256",
      "198.18.0.-1",
      "198.18.0.1 ",
      " 198.18.0.1",
      "1.2.3.4/32",
      "2001:db8:::1",
      "2001:db8::1::2",
      "1:2:3:4:5:6:7:8:9",
      "1:2:3:4:5:6:7",
      "1:2:3:4::5:6:7:8",
      "2001:db8::g",
      "2001:db8::12345",
      ":1",
      "1:",
      "fe80::1%eth0",
      "::198.18.0.1.1",
      "::1.2.3.4:5",
      "abc",
    ]
  ) {
    assert.equal(canonicalIP(bad), null, JSON.stringify(bad));
  }
  assert.equal(parseIP(undefined as unknown as string), null);
});

Deno.test("ipFamily", () => {
  assert.equal(ipFamily("198.18.0.1"), 4);
  assert.equal(ipFamily("2001:db8::1"), 6);
  assert.equal(ipFamily("::ffff:1.2.3.4"), 6);
  assert.equal(ipFamily("nope"), null);
});

Deno.test("canonicalCIDR clears host bits and validates the prefix", () => {
  const cases: [string, string | null][] = [
    ["198.18.0.0/15", "198.18.0.0/15"],
    ["198.19.7.9/15", "198.18.0.0/15"],
    ["198.18.3.4/32", "198.18.3.4/32"],
    ["198.18.3.4/0", "0.0.0.0/0"],
    ["198.18.3.4/33", null],
    ["198.18.3.4", null],
    ["198.18.3.4/", null],
    ["198.18.3.4/a", null],
    ["2001:db8::1/32", "2001:db8::/32"],
    ["2001:db8:ffff::/33", "2001:db8:8000::/33"],
    ["2001:db8::1/128", "2001:db8::1/128"],
    ["2001:db8::1/129", null],
    ["2001:db8::/-1", null],
  ];
  for (const [input, want] of cases) assert.equal(canonicalCIDR(input), want, input);
});

Deno.test("cidrContains", () => {
  const c4 = parseCIDR("198.18.0.0/15")!;
  assert.ok(cidrContains(c4, parseIP("198.19.255.255")!));
  assert.ok(cidrContains(c4, parseIP("198.18.0.0")!));
  assert.ok(!cidrContains(c4, parseIP("198.20.0.0")!));
  assert.ok(!cidrContains(c4, parseIP("2001:db8::1")!));
  const c6 = parseCIDR("2001:db8:8000::/33")!;
  assert.ok(cidrContains(c6, parseIP("2001:db8:ffff::1")!));
  assert.ok(!cidrContains(c6, parseIP("2001:db8:7fff::1")!));
  assert.ok(cidrContains(parseCIDR("0.0.0.0/0")!, parseIP("1.2.3.4")!));
  assert.ok(cidrContains(parseCIDR("198.18.0.7/32")!, parseIP("198.18.0.7")!));
  assert.ok(!cidrContains(parseCIDR("198.18.0.7/32")!, parseIP("198.18.0.6")!));
});

Deno.test("compareIP orders IPv4 before IPv6, then numerically", () => {
  const list = ["2001:db8::2", "198.18.0.10", "198.18.0.9", "2001:db8::1", "198.18.1.0"]
    .map((s) => parseIP(s)!);
  list.sort(compareIP);
  assert.deepEqual(list.map((p) => formatIP(p)), [
    "198.18.0.9",
    "198.18.0.10",
    "198.18.1.0",
    "2001:db8::1",
    "2001:db8::2",
  ]);
});

Deno.test("canonicalText returns canonical input as is and reformats the rest", () => {
  const cases: [string, string][] = [
    ["198.18.0.1", "198.18.0.1"],
    ["0.0.0.0", "0.0.0.0"],
    ["198.18.0.10", "198.18.0.10"],
    ["198.18.0.01", "198.18.0.1"],
    ["010.1.2.3", "10.1.2.3"],
    ["198.018.0.100", "198.18.0.100"],
    ["2001:DB8::1", "2001:db8::1"],
  ];
  for (const [input, want] of cases) {
    assert.equal(canonicalText(input, parseIP(input)!), want, input);
  }
});
