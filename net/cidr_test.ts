import assert from "node:assert/strict";
import { canonicalCIDR, cidrContains, isCIDR, parseCIDR } from "./cidr.ts";
import { parseIP } from "./ip.ts";

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

Deno.test("isCIDR reads leading zeros as k8s.io/utils/net ParseCIDRSloppy does, unless strict", () => {
  // Upstream validates --cluster-cidr and --nodeport-addresses with netutils.ParseCIDRSloppy.
  assert.ok(isCIDR("010.0.0.0/8"));
  assert.equal(canonicalCIDR("010.0.0.0/8"), "10.0.0.0/8");
  assert.ok(!isCIDR("010.0.0.0/8", true));
  assert.ok(isCIDR("2001:db8::/32"));
  assert.ok(!isCIDR("198.18.0.0/33"));
  assert.ok(!isCIDR("2001:db8::/129"));
});
