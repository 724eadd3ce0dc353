import assert from "node:assert/strict";
import {
  align4,
  attributeMap,
  errnoAt,
  NLMSG_ERROR,
  NLMSG_NOOP,
  parseAcks,
  putHeader,
} from "./message.ts";

const LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

Deno.test("putHeader writes nlmsghdr and, with a family, nfgenmsg", () => {
  const dv = new DataView(new ArrayBuffer(40));
  putHeader(dv, 4, 20, 0x0a0c, 0x405, 7, 2, 10);
  assert.equal(dv.getUint32(4, LE), 20);
  assert.equal(dv.getUint16(8, LE), 0x0a0c);
  assert.equal(dv.getUint16(10, LE), 0x405);
  assert.equal(dv.getUint32(12, LE), 7);
  assert.equal(dv.getUint8(20), 2);
  assert.equal(dv.getUint16(22, false), 10); // res_id is big-endian
  assert.equal(align4(26), 28);
  assert.equal(align4(28), 28);
});

Deno.test("parseAcks reports each ack's sequence number and errno", () => {
  const buf = new Uint8Array(36 * 3 + 20);
  const dv = new DataView(buf.buffer);
  const ack = (off: number, seq: number, err: number) => {
    putHeader(dv, off, 36, NLMSG_ERROR, 0, seq);
    dv.setInt32(off + 16, err, LE);
    putHeader(dv, off + 20, 16, 0x0a0c, 1, seq); // the echoed request header
  };
  ack(0, 7, 0);
  ack(36, 8, -17);
  // A non-ack message in between is skipped.
  putHeader(dv, 72, 20, 3, 0, 0);
  ack(92, 9, -1);
  const seen: [number, number][] = [];
  assert.equal(parseAcks(dv, buf.length, (s, e) => seen.push([s, e])), 3);
  assert.deepEqual(seen, [[7, 0], [8, 17], [9, 1]]);
  assert.equal(errnoAt(dv, 36), 17);
  assert.equal(errnoAt(dv, 72), undefined);
  dv.setUint32(0, 400, LE);
  assert.throws(() => parseAcks(dv, buf.length, () => {}), /malformed netlink reply/);
});

Deno.test("parseAcks: a no-op fence is no ack until the kernel answers it", () => {
  const dv = new DataView(new ArrayBuffer(16));
  putHeader(dv, 0, 16, NLMSG_NOOP, 5, 1);
  assert.equal(parseAcks(dv, 16, () => assert.fail("not an ack")), 0);
});

Deno.test("attributeMap: by type, nested flag masked, a truncated attribute ends the walk", () => {
  const b = new Uint8Array([
    ...[6, 0, 1, 0x80, 0xaa, 0xbb, 0, 0], // type 1 (nested flag), 2 bytes, padded
    ...[5, 0, 2, 0, 0xcc, 0, 0, 0], // type 2, 1 byte, padded
    ...[9, 0, 3, 0, 1], // type 3, claims 5 bytes that are not there
  ]);
  const m = attributeMap(b);
  assert.deepEqual([...m.keys()], [1, 2]);
  assert.deepEqual([...m.get(1)!], [0xaa, 0xbb]);
  assert.deepEqual([...m.get(2)!], [0xcc]);
});
