import assert from "node:assert/strict";
import { encodeRuleDumpRequest, parseRuleDump } from "./rule_dump.ts";

const enc = new TextEncoder();

/** One netlink message: header, nfgenmsg, then string attributes. */
function message(type: number, family: number, attrs: [number, string][]): Uint8Array {
  const parts = attrs.map(([t, s]) => {
    const v = enc.encode(s + "\0");
    const a = new Uint8Array((4 + v.length + 3) & ~3);
    const dv = new DataView(a.buffer);
    dv.setUint16(0, 4 + v.length, true);
    dv.setUint16(2, t, true);
    a.set(v, 4);
    return a;
  });
  const len = 20 + parts.reduce((n, p) => n + p.length, 0);
  const m = new Uint8Array(len);
  const dv = new DataView(m.buffer);
  dv.setUint32(0, len, true);
  dv.setUint16(4, type, true);
  m[16] = family;
  let off = 20;
  for (const p of parts) {
    m.set(p, off);
    off += p.length;
  }
  return m;
}

function concat(...ms: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(ms.reduce((n, m) => n + m.length, 0));
  let off = 0;
  for (const m of ms) {
    out.set(m, off);
    off += m.length;
  }
  return out;
}

const NEWRULE = (10 << 8) | 6;

Deno.test("encodeRuleDumpRequest: GETRULE dump of one family, filtered by table", () => {
  const b = encodeRuleDumpRequest("ip6", "kube-proxy", 7);
  const v = new DataView(b.buffer);
  assert.equal(v.getUint32(0, true), b.length);
  assert.equal(b.length % 4, 0);
  assert.equal(v.getUint16(4, true), (10 << 8) | 7);
  assert.equal(v.getUint16(6, true), 0x301);
  assert.equal(v.getUint32(8, true), 7);
  assert.equal(b[16], 10);
  assert.equal(v.getUint16(22, true), 1, "NFTA_RULE_TABLE");
  assert.equal(new TextDecoder().decode(b.subarray(24, 34)), "kube-proxy");
  assert.throws(() => encodeRuleDumpRequest("arp", "t", 1), /unknown family/);
});

Deno.test("parseRuleDump counts rules per chain of our table only, until DONE", () => {
  const counts = new Map<string, number>();
  const buf = concat(
    message(NEWRULE, 2, [[1, "kube-proxy"], [2, "services"]]),
    message(NEWRULE, 2, [[1, "kube-proxy"], [2, "services"]]),
    message(NEWRULE, 2, [[1, "other"], [2, "services"]]),
    message(NEWRULE, 2, [[1, "kube-proxy"], [2, "nat-prerouting"]]),
  );
  assert.equal(parseRuleDump(buf, buf.length, "kube-proxy", counts), "more");
  assert.deepEqual([...counts], [["services", 2], ["nat-prerouting", 1]]);
  const done = new Uint8Array(20);
  new DataView(done.buffer).setUint32(0, 20, true);
  new DataView(done.buffer).setUint16(4, 3, true);
  assert.equal(parseRuleDump(done, done.length, "kube-proxy", counts), "done");
  const err = new Uint8Array(36);
  const ev = new DataView(err.buffer);
  ev.setUint32(0, 36, true);
  ev.setUint16(4, 2, true);
  ev.setInt32(16, -2, true);
  assert.equal(parseRuleDump(err, err.length, "kube-proxy", counts), 2, "ENOENT");
});
