import assert from "node:assert/strict";
import { align4, putHeader } from "../../netlink/message.ts";
import { nftType } from "./nf_tables.ts";
import { decodeNotifications } from "./notify.ts";
import { ownPortidFilter } from "./monitor.ts";
import { netlinkPortid } from "../../netlink/own_portids.ts";

const enc = new TextEncoder();

/** One nf_tables message: type, port id, family, and string or be32 attributes. */
function message(msg: number, portid: number, family: number, attrs: [number, string | number][]) {
  const parts = attrs.map(([t, v]) => {
    const val = typeof v === "string"
      ? enc.encode(v + "\0")
      : new Uint8Array([v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255]);
    const a = new Uint8Array(align4(4 + val.length));
    new DataView(a.buffer).setUint16(0, 4 + val.length, true);
    new DataView(a.buffer).setUint16(2, t, true);
    a.set(val, 4);
    return a;
  });
  const len = 20 + parts.reduce((n, p) => n + p.length, 0);
  const b = new Uint8Array(len);
  const dv = new DataView(b.buffer);
  putHeader(dv, 0, len, nftType(msg), 0, 1, family);
  dv.setUint32(12, portid, true);
  let off = 20;
  for (const p of parts) {
    b.set(p, off);
    off += p.length;
  }
  return b;
}

function concat(...bs: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(bs.reduce((n, b) => n + b.length, 0));
  let off = 0;
  for (const b of bs) {
    out.set(b, off);
    off += b.length;
  }
  return out;
}

Deno.test("decodeNotifications: object names, deletions, and NEWGEN's id and process", () => {
  const buf = concat(
    message(8, 77, 2, [[1, "kube-proxy"], [2, "services"]]), // DELRULE
    message(14, 77, 2, [[1, "kube-proxy"], [2, "service-ips"]]), // DELSETELEM
    message(5, 77, 10, [[1, "kube-proxy"], [3, "dnat-tcp-1"]]), // DELCHAIN
    message(2, 77, 2, [[1, "kube-proxy"]]), // DELTABLE
    message(9, 77, 2, [[1, "kube-proxy"], [2, "intruder-set"]]), // NEWSET
    message(15, 77, 0, [[1, 1234], [2, 4321], [3, "nft"]]), // NEWGEN
  );
  const got = decodeNotifications(buf, buf.length);
  assert.deepEqual(got.map((m) => [m.kind, m.op, m.family, m.table, m.name]), [
    ["rule", "del", 2, "kube-proxy", "services"],
    ["element", "del", 2, "kube-proxy", "service-ips"],
    ["chain", "del", 10, "kube-proxy", "dnat-tcp-1"],
    ["table", "del", 2, "kube-proxy", ""],
    ["set", "new", 2, "kube-proxy", "intruder-set"],
    ["gen", "new", 0, "", ""],
  ]);
  assert.ok(got.every((m) => m.portid === 77));
  assert.deepEqual([got[5].genId, got[5].pid, got[5].proc], [1234, 4321, "nft"]);
  // A truncated tail is skipped, not thrown on.
  assert.equal(decodeNotifications(buf, 30).length, 0);
});

Deno.test("ownPortidFilter: ld nlmsg_pid, one jeq per own port id into the drop, accept", () => {
  const prog = ownPortidFilter([0x01020304, 7]);
  const dv = new DataView(prog.buffer);
  const ins = (i: number) => [
    dv.getUint16(i * 8, true),
    dv.getUint8(i * 8 + 2),
    dv.getUint8(i * 8 + 3),
    dv.getUint32(i * 8 + 4, true),
  ];
  assert.equal(prog.length, 5 * 8);
  assert.deepEqual(ins(0), [0x20, 0, 0, 12]);
  assert.deepEqual(ins(1), [0x15, 2, 0, 0x04030201]); // byte-swapped: BPF loads network order
  assert.deepEqual(ins(2), [0x15, 1, 0, 0x07000000]);
  assert.deepEqual(ins(3), [0x06, 0, 0, 0xffffffff]);
  assert.deepEqual(ins(4), [0x06, 0, 0, 0]);
});

Deno.test("netlinkPortid reads sockaddr_nl's port id, and nothing else's", () => {
  const a = new Uint8Array(12);
  const dv = new DataView(a.buffer);
  dv.setUint16(0, 16, true);
  dv.setUint32(4, 4294963201, true);
  assert.equal(netlinkPortid(a, 12), 4294963201);
  dv.setUint16(0, 2, true); // AF_INET
  assert.equal(netlinkPortid(a, 12), undefined);
  assert.equal(netlinkPortid(a, 8), undefined);
});
