import assert from "node:assert/strict";
import {
  appendIdAttr,
  CT_DELETE_TYPE,
  CTA_ID,
  entryProblem,
  formatIpv4,
  parseIpv4,
  putDeleteHeader,
  putFence,
  swap16,
} from "./wire.ts";
import type { ConntrackEntry } from "./types.ts";

const LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** The u32 a little- or big-endian host reads from the 4 bytes of `a.b.c.d`. */
function netU32(a: number, b: number, c: number, d: number): number {
  return new DataView(new Uint8Array([a, b, c, d]).buffer).getUint32(0, LE);
}

Deno.test("formatIpv4 reads a network-order u32", () => {
  assert.equal(formatIpv4(netU32(198, 18, 0, 1)), "198.18.0.1");
  assert.equal(formatIpv4(netU32(255, 255, 255, 255)), "255.255.255.255");
  assert.equal(formatIpv4(0), "0.0.0.0");
});

Deno.test("parseIpv4 round-trips and rejects malformed text", () => {
  for (const s of ["198.18.0.1", "198.19.255.254", "0.0.0.0", "255.255.255.255"]) {
    const v = parseIpv4(s);
    assert.ok(v >= 0, s);
    assert.equal(formatIpv4(v), s);
  }
  assert.equal(parseIpv4("198.18.0.1"), netU32(198, 18, 0, 1));
  for (
    const bad of [
      "",
      "1.2.3",
      "1.2.3.4.5",
      "256.0.0.1",
      "01.2.3.4",
      "1..2.3",
      "1.2.3.4 ",
      "a.b.c.d",
      "::1",
    ]
  ) {
    assert.equal(parseIpv4(bad), -1, JSON.stringify(bad));
  }
});

Deno.test("swap16 converts ports between host and network order", () => {
  const net = new DataView(new Uint8Array([0x03, 0xe8]).buffer).getUint16(0, LE);
  assert.equal(swap16(net), 1000);
  assert.equal(swap16(swap16(53)), 53);
  assert.equal(swap16(swap16(65535)), 65535);
});

Deno.test("putDeleteHeader + appendIdAttr frame a ctnetlink delete with CTA_ID", () => {
  const buf = new Uint8Array(64);
  const dv = new DataView(buf.buffer);
  putDeleteHeader(dv, 8, 0x01020304, 2);
  assert.equal(dv.getUint32(8, LE), 20);
  assert.equal(dv.getUint16(12, LE), CT_DELETE_TYPE);
  assert.equal(dv.getUint16(14, LE), 1); // NLM_F_REQUEST: the kernel reports failures only
  assert.equal(dv.getUint32(16, LE), 0x01020304);
  assert.equal(buf[24], 2);
  // Pretend an attribute of 6 bytes was appended: CTA_ID must land aligned.
  dv.setUint32(8, 26, LE);
  assert.equal(appendIdAttr(dv, 8, 0xdeadbeef), 36);
  assert.equal(dv.getUint32(8, LE), 36);
  assert.equal(dv.getUint16(8 + 28, LE), 8);
  assert.equal(dv.getUint16(8 + 30, LE), CTA_ID);
  assert.deepEqual(Array.from(buf.subarray(8 + 32, 8 + 36)), [0xde, 0xad, 0xbe, 0xef]);
  putDeleteHeader(dv, 0, 5, 10, true);
  assert.equal(dv.getUint16(6, LE), 1 | 4); // NLM_F_REQUEST | NLM_F_ACK
  assert.equal(buf[16], 10);
});

Deno.test("putFence writes an acked NLMSG_NOOP", () => {
  const dv = new DataView(new ArrayBuffer(32));
  assert.equal(putFence(dv, 4, 99), 16);
  assert.equal(dv.getUint32(4, LE), 16);
  assert.equal(dv.getUint16(8, LE), 1); // NLMSG_NOOP
  assert.equal(dv.getUint16(10, LE), 1 | 4);
  assert.equal(dv.getUint32(12, LE), 99);
});

Deno.test("entryProblem names the bad field", () => {
  const good: ConntrackEntry = {
    family: 4,
    proto: 17,
    origSrc: "198.18.0.1",
    origDst: "198.18.0.2",
    origSport: 1000,
    origDport: 53,
    replySrc: "198.18.0.2",
    replyDst: "198.18.0.1",
    replySport: 53,
    replyDport: 1000,
    mark: 0,
    zone: 0,
    id: 0,
  };
  assert.equal(entryProblem(good), undefined);
  assert.match(entryProblem({ ...good, family: 5 as 4 })!, /family must be 4 or 6/);
  assert.match(entryProblem({ ...good, origDport: 70000 })!, /origDport/);
  assert.match(entryProblem({ ...good, proto: 1.5 })!, /proto/);
  assert.match(entryProblem({ ...good, id: -1 })!, /id must be a u32/);
});
