import assert from "node:assert/strict";
import { PackedEndpoint } from "./packed_endpoint.ts";
import { parseIPv4Number } from "../net/ip.ts";

const BASE = { ip: "198.18.0.7", port: 8080, ready: true, serving: true, terminating: false };

Deno.test("packed endpoint: every field reads back as built, in each combination of conditions", () => {
  for (let bits = 0; bits < 16; bits++) {
    const parts = {
      ip: "2001:db8::7",
      port: 65535,
      ready: (bits & 1) !== 0,
      serving: (bits & 2) !== 0,
      terminating: (bits & 4) !== 0,
      isLocal: (bits & 8) !== 0,
      nodeName: "node-a",
      zone: "zone-1",
    };
    const ep = PackedEndpoint.of(parts);
    assert.deepEqual(ep.toJSON(), parts);
    assert.deepEqual(
      [ep.ip, ep.port, ep.ready, ep.serving, ep.terminating, ep.isLocal, ep.nodeName, ep.zone],
      [
        parts.ip,
        65535,
        parts.ready,
        parts.serving,
        parts.terminating,
        parts.isLocal,
        "node-a",
        "zone-1",
      ],
    );
    assert.deepEqual([ep.zoneHints, ep.nodeHints], [undefined, undefined]);
  }
});

Deno.test("packed endpoint: an IPv4 address given as its number reads back as canonical text", () => {
  for (const ip of ["198.18.0.7", "198.19.255.255", "0.0.0.0", "255.255.255.255", "10.0.0.1"]) {
    const v4 = parseIPv4Number(ip, 0, ip.length);
    const ep = PackedEndpoint.of({ ...BASE, ip: v4, isLocal: false });
    assert.equal(ep.ip, ip);
    assert.equal(ep.v4, v4);
  }
});

Deno.test("packed endpoint: withPort changes the port only", () => {
  const ep = PackedEndpoint.of({ ...BASE, isLocal: true, nodeName: "n1", zoneHints: ["z1"] });
  const other = ep.withPort(443);
  assert.deepEqual(other.toJSON(), { ...ep.toJSON(), port: 443 });
  assert.deepEqual(ep.port, 8080);
});

Deno.test("packed endpoint: endpoints with the same node, zone and hints share one placement", () => {
  const a = PackedEndpoint.of({
    ...BASE,
    isLocal: false,
    nodeName: "n1",
    zone: "z",
    nodeHints: ["n1"],
  });
  const b = PackedEndpoint.of({
    ...BASE,
    ip: "198.18.0.8",
    isLocal: false,
    nodeName: "n1",
    zone: "z",
    nodeHints: ["n1"],
  });
  // One shared array: the hints of the second are those of the first.
  assert.equal(a.nodeHints, b.nodeHints);
  const c = PackedEndpoint.of({ ...BASE, isLocal: false, nodeName: "n1" });
  assert.deepEqual([c.nodeName, c.zone, c.nodeHints], ["n1", undefined, undefined]);
  const bare = PackedEndpoint.of({ ...BASE, isLocal: false });
  assert.deepEqual(bare.toJSON(), { ...BASE, isLocal: false });
  assert.ok(!("nodeName" in bare.toJSON()));
});

Deno.test("packed endpoint: JSON shows the fields, not the packing", () => {
  const ep = PackedEndpoint.of({ ...BASE, isLocal: false, nodeName: "n1" });
  assert.deepEqual(JSON.parse(JSON.stringify(ep)), { ...BASE, isLocal: false, nodeName: "n1" });
});
