import assert from "node:assert/strict";
import { bindAddressesFor, cidrContains } from "./bind_addresses.ts";

Deno.test("cidrContains: both families, prefix edges, no cross-family match", () => {
  assert.ok(cidrContains("198.18.0.0/15", "198.19.255.255"));
  assert.ok(!cidrContains("198.18.0.0/16", "198.19.0.1"));
  assert.ok(cidrContains("198.18.0.7/32", "198.18.0.7"));
  assert.ok(cidrContains("0.0.0.0/0", "198.18.0.1"));
  assert.ok(cidrContains("2001:db8::/32", "2001:db8:1::5"));
  assert.ok(!cidrContains("2001:db8::/48", "2001:db8:1::5"));
  assert.ok(cidrContains("::1/128", "::1"));
  assert.ok(cidrContains("::ffff:0:0/96", "::ffff:198.18.0.1"));
  assert.ok(!cidrContains("198.18.0.0/16", "2001:db8::1"));
});

Deno.test("v1alpha2 bind lists -> listeners", () => {
  const ips = ["127.0.0.1", "198.18.0.2", "198.19.0.3", "::1", "2001:db8::2"];
  // Both wildcards: one dual-stack [::] listener (a second one on 0.0.0.0 would clash).
  assert.deepEqual(bindAddressesFor({ cidrs: ["0.0.0.0/0", "::/0"], port: 10256 }, ips), [
    "[::]:10256",
  ]);
  // No IPv6 on the node: the IPv4 wildcard.
  assert.deepEqual(
    bindAddressesFor({ cidrs: ["0.0.0.0/0", "::/0"], port: 10256 }, ["198.18.0.2"], false),
    ["0.0.0.0:10256"],
  );
  // Upstream's metrics default: the loopback addresses.
  assert.deepEqual(bindAddressesFor({ cidrs: ["127.0.0.0/8", "::1/128"], port: 10249 }, ips), [
    "127.0.0.1:10249",
    "[::1]:10249",
  ]);
  assert.deepEqual(bindAddressesFor({ cidrs: ["198.18.0.0/16"], port: 1 }, ips), [
    "198.18.0.2:1",
  ]);
  // An IPv4 wildcard and specific IPv6 addresses can share a port.
  assert.deepEqual(bindAddressesFor({ cidrs: ["0.0.0.0/0", "2001:db8::/32"], port: 2 }, ips), [
    "0.0.0.0:2",
    "[2001:db8::2]:2",
  ]);
  assert.deepEqual(bindAddressesFor({ cidrs: ["203.0.113.0/24"], port: 3 }, ips), []);
});
