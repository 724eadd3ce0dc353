import assert from "node:assert/strict";
import {
  bigIntToBytes,
  canonicalIP,
  canonicalText,
  compareIP,
  formatIP,
  formatIPv4Number,
  formatIPv6Bytes,
  ipFamily,
  ipToBigInt,
  isIPv4,
  isIPv6,
  parseIP,
  parseIPv4Number,
  parseIPv6Bytes,
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

Deno.test("leading zeros: sloppy by default, as k8s.io/utils/net ParseIPSloppy; strict as Go net.ParseIP", () => {
  // Upstream kube-proxy reads API fields and its flags/config (--bind-address, the
  // healthz/metrics bind addresses) with netutils.ParseIPSloppy: "010" is decimal 10.
  assert.equal(canonicalIP("010.001.002.003"), "10.1.2.3");
  assert.ok(isIPv4("01.2.3.4"));
  assert.ok(isIPv6("::ffff:01.2.3.4"));
  // Go's net.ParseIP (Go >= 1.17) rejects them; strict is for text we wrote ourselves.
  assert.equal(parseIP("01.2.3.4", true), null);
  assert.equal(parseIP("::ffff:01.2.3.4", true), null);
  assert.equal(parseIPv4Number("1.2.3.00", 0, 8, true), -1);
  assert.ok(isIPv4("0.0.0.0", true));
  assert.ok(isIPv4("10.100.0.1", true));
});

Deno.test("parseIPv4Number and formatIPv4Number round-trip and reject malformed text", () => {
  for (const s of ["198.18.0.1", "198.19.255.254", "0.0.0.0", "255.255.255.255"]) {
    const v = parseIPv4Number(s);
    assert.ok(v >= 0, s);
    assert.equal(formatIPv4Number(v), s);
  }
  assert.equal(parseIPv4Number("198.18.0.1"), 0xc6120001);
  assert.equal(parseIPv4Number("x1.2.3.4y", 1, 8), 0x01020304);
  for (
    const bad of ["", "1.2.3", "1.2.3.4.5", "256.0.0.1", "1..2.3", "1.2.3.4 ", "a.b.c.d", "::1"]
  ) {
    assert.equal(parseIPv4Number(bad), -1, JSON.stringify(bad));
  }
});

function v6bytes(s: string): Uint8Array {
  const out = new Uint8Array(16);
  assert.ok(parseIPv6Bytes(s, out), s);
  return out;
}

Deno.test("formatIPv6Bytes: RFC 5952 text, with the IPv4 tail style asked for", () => {
  const cases: [string, string][] = [
    ["2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"], // first of equal runs
    ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"], // a single zero group stays
    ["::", "::"],
    ["::1", "::1"],
    ["1::", "1::"],
    ["2001:DB8:A:B:C:D:E:F", "2001:db8:a:b:c:d:e:f"],
    ["2001:db8::198.18.0.1", "2001:db8::c612:1"],
    ["2001:db8:1:0:0:2:0:0", "2001:db8:1::2:0:0"],
  ];
  for (const [input, want] of cases) {
    for (const tail of ["hex", "mapped", "inet_ntop"] as const) {
      assert.equal(formatIPv6Bytes(v6bytes(input), 0, tail), want, `${input} ${tail}`);
    }
  }
  const mapped = v6bytes("::ffff:198.18.0.1");
  assert.equal(formatIPv6Bytes(mapped), "::ffff:c612:1");
  assert.equal(formatIPv6Bytes(mapped, 0, "mapped"), "::ffff:198.18.0.1");
  assert.equal(formatIPv6Bytes(mapped, 0, "inet_ntop"), "::ffff:198.18.0.1");
  const compat = v6bytes("::198.18.0.1");
  assert.equal(formatIPv6Bytes(compat, 0, "mapped"), "::c612:1");
  assert.equal(formatIPv6Bytes(compat, 0, "inet_ntop"), "::198.18.0.1");
});

Deno.test("parseIPv6Bytes writes bytes at an offset and rejects malformed text", () => {
  const out = new Uint8Array(40).fill(7);
  assert.ok(parseIPv6Bytes("2001:db8::102", out, 20));
  assert.deepEqual(
    Array.from(out.subarray(20, 36)),
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02],
  );
  assert.equal(out[19], 7);
  assert.equal(out[36], 7);
  assert.equal(formatIPv6Bytes(out, 20), "2001:db8::102");
  for (
    const bad of [
      "",
      ":",
      "1:2:3:4:5:6:7",
      "1:2:3:4:5:6:7:8:9",
      "1::2::3",
      "12345::1",
      "fe80::1%eth0",
      "1:2:3:4:5:6:7::8",
      "198.18.0.1",
      "::1.2.3",
      "1.2.3.4::",
      "g::1",
    ]
  ) {
    assert.equal(parseIPv6Bytes(bad, new Uint8Array(16)), false, JSON.stringify(bad));
  }
});

Deno.test("ipToBigInt and bigIntToBytes convert both ways", () => {
  assert.equal(ipToBigInt(parseIP("198.18.0.1")!.bytes), 0xc6120001n);
  assert.equal(formatIP({ family: 4, bytes: bigIntToBytes(0xc6120001n, 4) }), "198.18.0.1");
  const v6 = ipToBigInt(parseIP("2001:db8::1")!.bytes);
  assert.equal(v6, 0x20010db8000000000000000000000001n);
  assert.equal(formatIP({ family: 6, bytes: bigIntToBytes(v6, 16) }), "2001:db8::1");
});
