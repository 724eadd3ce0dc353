import assert from "node:assert/strict";
import { parseFields, type SetLayout } from "./codec.ts";
import {
  decodeValue,
  encodeGetElement,
  type GetReply,
  parseGetElementReply,
} from "./element_get.ts";

const BUCKETS: SetLayout = {
  key: parseFields("ip daddr . meta l4proto . th dport . numgen random mod 1", true)!,
  data: parseFields("ip daddr . tcp dport", true)!,
};
const DISPATCH: SetLayout = {
  key: parseFields("ipv4_addr . inet_proto . inet_service", false)!,
  data: parseFields("verdict", false)!,
};

/** A netlink attribute (nested when `kids` are attributes). */
function a(type: number, value: Uint8Array | Uint8Array[]): Uint8Array {
  const v = Array.isArray(value)
    ? value.reduce((acc, x) => new Uint8Array([...acc, ...x]), new Uint8Array())
    : value;
  const len = 4 + v.length;
  const b = new Uint8Array((len + 3) & ~3);
  new DataView(b.buffer).setUint16(0, len, true);
  new DataView(b.buffer).setUint16(2, type | (Array.isArray(value) ? 0x8000 : 0), true);
  b.set(v, 4);
  return b;
}

function msg(type: number, seq: number, body: Uint8Array): Uint8Array {
  const b = new Uint8Array(20 + body.length);
  const v = new DataView(b.buffer);
  v.setUint32(0, b.length, true);
  v.setUint16(4, type, true);
  v.setUint32(8, seq, true);
  b[16] = 2;
  b.set(body, 20);
  return b;
}

function ack(seq: number, errno: number): Uint8Array {
  const b = new Uint8Array(36);
  const v = new DataView(b.buffer);
  v.setUint32(0, 36, true);
  v.setUint16(4, 2, true);
  v.setUint32(8, seq, true);
  v.setInt32(16, -errno, true);
  return b;
}

Deno.test("the GETSETELEM request carries the table, the set and the encoded key", () => {
  const m = encodeGetElement("ip", "kube-proxy", "endpoints-tcp", BUCKETS, [
    "198.19.0.1",
    "tcp",
    "80",
    "3",
  ], 9)!;
  const v = new DataView(m.buffer);
  assert.equal(v.getUint32(0, true), m.length);
  assert.equal(v.getUint16(4, true), (10 << 8) | 13);
  assert.equal(v.getUint16(6, true), 0x5); // request, ack
  assert.equal(m[16], 2);
  const text = new TextDecoder().decode(m);
  assert.ok(text.includes("kube-proxy\0") && text.includes("endpoints-tcp\0"));
  // The key: 198.19.0.1, tcp (padded), 80 (big-endian, padded), bucket 3 (host order).
  const key = [198, 19, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0, 3, 0, 0, 0];
  assert.ok(m.join().includes(key.join()), m.join());
  assert.equal(
    encodeGetElement("ip", "t", "s", BUCKETS, ["not an ip", "tcp", "80", "1"], 1),
    undefined,
  );
});

Deno.test("values decode as nft prints them", () => {
  const b = new Uint8Array([198, 18, 128, 1, 31, 144, 0, 0]);
  assert.deepEqual(decodeValue(BUCKETS.data!, b), ["198.18.128.1", "8080"]);
  const six = parseFields("ip6 daddr . tcp dport", true)!;
  const addr = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10];
  assert.deepEqual(decodeValue(six, new Uint8Array([...addr, 0, 80, 0, 0])), [
    "2001:db8:1::10",
    "80",
  ]);
  assert.equal(decodeValue(BUCKETS.data!, new Uint8Array(3)), undefined);
});

Deno.test("a reply: the element with its verdict and comment, then the ack", () => {
  const verdict = a(2, [
    a(1, new Uint8Array([0xff, 0xff, 0xff, 0xfc])),
    a(2, new TextEncoder().encode("dnat-tcp-16\0")),
  ]);
  const el = a(1, [
    a(1, [a(1, new Uint8Array(12))]),
    a(2, [verdict]),
    a(6, new Uint8Array([0, 11, ...new TextEncoder().encode("ns0/svc-0:p"), 0].slice(0, 13))),
  ]);
  const body = new Uint8Array([...a(1, new TextEncoder().encode("kube-proxy\0")), ...a(3, [el])]);
  const buf = new Uint8Array([...msg((10 << 8) | 12, 5, body), ...ack(5, 0)]);
  const out: GetReply = {};
  parseGetElementReply(buf, buf.length, 5, DISPATCH, { map: "service-ips" }, [
    "198.19.0.1",
    "tcp",
    "80",
  ], out);
  assert.equal(out.errno, 0);
  assert.deepEqual(out.element, {
    kind: "element",
    map: "service-ips",
    key: ["198.19.0.1", "tcp", "80"],
    value: ["goto dnat-tcp-16"],
    comment: "ns0/svc-0:p",
  });
  const missing: GetReply = {};
  const nb = ack(6, 2);
  parseGetElementReply(nb, nb.length, 6, DISPATCH, { map: "service-ips" }, ["x"], missing);
  assert.deepEqual(missing, { errno: 2 });
});
