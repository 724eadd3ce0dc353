import assert from "node:assert/strict";
import { encodeDeleteTable, parseSetDump, udataHazard } from "./set_screen.ts";

const hex = (s: string) => new Uint8Array(s.match(/../g)!.map((b) => parseInt(b, 16)));

/**
 * Set userdata nft 1.0.6 wrote for `typeof` sets (dumped from a kernel): what libnftables 1.0.6
 * reads back without trouble, so none may be flagged.
 */
const WRITTEN_BY_1_0_6: Record<string, string> = {
  "typeof ip saddr": "0004020000000314000407000000010c00040c00000001040b000000",
  "typeof meta mark": "000401000000030e0004090000000106000403000000",
  "typeof ct mark": "000401000000031400040c000000010c0004030000000104ffffffff",
  "typeof ip saddr . tcp dport":
    "000400000000033400040d000000012c0014000407000000010c00040c00000001040b0000000114000407000000010c000408000000010402000000",
  "typeof iifname": "000401000000030e0004090000000106000406000000",
  "typeof numgen random mod 2":
    "000401000000031a0004170000000112000401000000010402000000020400000000",
  "typeof ip6 daddr . meta l4proto . th dport":
    "000400000000034400040d000000013c0014000407000000010c00040d000000010409000000010e00040900000001060004100000000214000407000000010c00040b000000010402000000",
  "typeof ip daddr : meta mark":
    "0004020000000104010000000314000407000000010c00040c00000001040c000000040e0004090000000106000403000000060400000000",
  "typeof ct state": "000401000000031400040c000000010c0004000000000104ffffffff",
  "typeof osf name": "000401000000030800040b0000000100",
  "typeof ip dscp": "0004020000000314000407000000010c00040c000000010403000000",
  'type ipv4_addr; comment "x"': "00040200000007027800",
  "typeof meta skuid": "000401000000030e000409000000010600040a000000",
  "typeof fib daddr type": "000401000000031400041a000000010c000403000000010402000000",
  "typeof tcp option maxseg size":
    "000402000000031a0004080000000112010402000000020401000000000402000000",
  "typeof socket mark": "000401000000030e00040a0000000106000401000000",
  "typeof rt mtu": "000401000000030e0004190000000106000403000000",
  "typeof jhash ip saddr mod 4":
    "0004010000000326000418000000011e000400000000010400000000020404000000030400000000040400000000",
  "typeof ipsec in reqid": "000401000000031a00041b0000000112000405000000010400000000020400000000",
};

Deno.test("udata nft 1.0.6 writes is never flagged", () => {
  for (const [what, h] of Object.entries(WRITTEN_BY_1_0_6)) {
    assert.equal(udataHazard(hex(h)), undefined, what);
  }
});

/** Key byte order, then a typeof key annotation with expression type `etype` and `data`. */
function typeofUdata(etype: number, data: number[]): Uint8Array {
  const le = [etype & 255, (etype >> 8) & 255, 0, 0];
  const inner = [0, 4, ...le, 1, data.length, ...data];
  return new Uint8Array([0, 4, 1, 0, 0, 0, 3, inner.length, ...inner]);
}

Deno.test("typeof annotations libnftables 1.0.x would crash on are flagged", () => {
  // Crashed nft 1.0.6 in a namespace (a NULL decoder): an expression type it does not know,
  // types it knows without a userdata decoder, in the key or in the data annotation.
  for (const etype of [200, 30, 3, 1, 0x14]) {
    assert.match(udataHazard(typeofUdata(etype, [1, 4, 0, 0, 0, 0]))!, /expression type/);
  }
  const dataTypeof = new Uint8Array([
    0,
    4,
    1,
    0,
    0,
    0,
    4,
    12,
    0,
    4,
    250,
    0,
    0,
    0,
    1,
    4,
    0,
    0,
    0,
    0,
  ]);
  assert.match(udataHazard(dataTypeof)!, /expression type 250/);
  // Inside a concatenation too.
  const sub = [0, 4, 200, 0, 0, 0, 1, 6, 0, 4, 0, 0, 0, 0];
  assert.match(udataHazard(typeofUdata(13, [0, sub.length, ...sub]))!, /expression type 200/);
  // An attribute running past the end of the blob.
  assert.match(udataHazard(hex("0004010000000310"))!, /past the end/);
  assert.match(udataHazard(typeofUdata(9, [0, 40, 1]))!, /past the end/);
});

Deno.test("userdata libnftables rejects cleanly is not flagged", () => {
  // A short key byte order: "Cannot parse userdata", and the set is skipped, no crash.
  assert.equal(udataHazard(hex("000101")), undefined);
  // Unknown top-level attributes are ignored.
  assert.equal(udataHazard(hex("0004010000001403787878")), undefined);
  // A typeof annotation without data, or with a bad type length, is ignored.
  assert.equal(udataHazard(new Uint8Array([3, 6, 0, 4, 200, 0, 0, 0])), undefined);
  assert.equal(udataHazard(new Uint8Array([3, 5, 0, 3, 200, 0, 0])), undefined);
  // A known expression with junk data it parses (osf with no attributes) is not our concern.
  assert.equal(udataHazard(typeofUdata(11, [0, 0])), undefined);
});

Deno.test("the set dump parser reads NEWSET messages and stops at DONE", () => {
  const enc = new TextEncoder();
  const attr = (t: number, v: Uint8Array) => {
    const b = new Uint8Array((4 + v.length + 3) & ~3);
    new DataView(b.buffer).setUint16(0, 4 + v.length, true);
    new DataView(b.buffer).setUint16(2, t, true);
    b.set(v, 4);
    return b;
  };
  const z = (s: string) => new Uint8Array([...enc.encode(s), 0]);
  const body = [attr(1, z("t1")), attr(2, z("s1")), attr(13, hex("0004010000000310"))];
  const len = 20 + body.reduce((n, a) => n + a.length, 0);
  const msg = new Uint8Array(len + 16);
  const v = new DataView(msg.buffer);
  v.setUint32(0, len, true);
  v.setUint16(4, (10 << 8) | 9, true);
  msg[16] = 10; // ip6
  let off = 20;
  for (const a of body) {
    msg.set(a, off);
    off += a.length;
  }
  v.setUint32(len, 16, true);
  v.setUint16(len + 4, 3, true); // NLMSG_DONE
  const got: unknown[] = [];
  assert.equal(parseSetDump(msg, msg.length, (s) => got.push(s)), "done");
  assert.deepEqual(got, [{
    family: "ip6",
    table: "t1",
    name: "s1",
    userdata: hex("0004010000000310"),
  }]);
});

Deno.test("the raw table delete is one acked DELTABLE between batch begin and end", () => {
  const b = encodeDeleteTable("ip", "kube-proxy", 7);
  const v = new DataView(b.bytes.buffer);
  assert.equal(v.getUint16(4, true), 0x10); // batch begin
  assert.equal(v.getUint16(20 + 4, true), (10 << 8) | 2); // NFT_MSG_DELTABLE
  assert.equal(b.bytes[20 + 16], 2); // AF_INET
  const name = new TextDecoder().decode(b.bytes.subarray(44, 44 + 10));
  assert.equal(name, "kube-proxy");
  const end = 20 + v.getUint32(20, true);
  assert.equal(v.getUint16(end + 4, true), 0x11); // batch end
  assert.equal(end + 20, b.bytes.length);
  assert.deepEqual(b.seqs, [8]);
});

Deno.test("udataHazard: the anonymous vmap nft 1.0.6 writes itself (verdict data typeof) is safe", () => {
  // `numgen random mod 2 vmap { 0 : goto a, 1 : goto a }` as nft 1.0.6 stores it (dumped on
  // kernel 6.18); nft lists it back without trouble.
  const hex = "00040100000001040000000004080004010000000100060400000000";
  const udata = new Uint8Array(hex.match(/../g)!.map((b) => parseInt(b, 16)));
  assert.equal(udataHazard(udata), undefined);
});
