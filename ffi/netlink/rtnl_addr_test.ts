import assert from "node:assert/strict";
import {
  getAddrRequest,
  parseAddrMessages,
  RTM_DELADDR,
  RTM_GETADDR,
  RTM_NEWADDR,
} from "./rtnl_addr.ts";
import { NLMSG_DONE, putHeader } from "./message.ts";

/** One RTM_*ADDR message: ifaddrmsg, then (type, bytes) attributes. */
function addrMsg(type: number, family: number, attrs: [number, number[]][]): Uint8Array {
  const body = attrs.map(([t, v]) => {
    const a = new Uint8Array((4 + v.length + 3) & ~3);
    new DataView(a.buffer).setUint16(0, 4 + v.length, true);
    new DataView(a.buffer).setUint16(2, t, true);
    a.set(v, 4);
    return a;
  });
  const len = 16 + 8 + body.reduce((n, a) => n + a.length, 0);
  const m = new Uint8Array(len);
  putHeader(new DataView(m.buffer), 0, len, type, 0, 1);
  m[16] = family;
  let off = 24;
  for (const a of body) m.set(a, off), off += a.length;
  return m;
}

function done(): Uint8Array {
  const m = new Uint8Array(20);
  putHeader(new DataView(m.buffer), 0, 20, NLMSG_DONE, 0, 1);
  return m;
}

const concat = (...p: Uint8Array[]) => {
  const out = new Uint8Array(p.reduce((n, a) => n + a.length, 0));
  let o = 0;
  for (const a of p) out.set(a, o), o += a.length;
  return out;
};

Deno.test("rtnl: the RTM_GETADDR dump request", () => {
  const r = getAddrRequest(7);
  const dv = new DataView(r.buffer);
  assert.equal(r.length, 24);
  assert.equal(dv.getUint32(0, true), 24);
  assert.equal(dv.getUint16(4, true), RTM_GETADDR);
  assert.equal(dv.getUint16(6, true), 0x301); // NLM_F_REQUEST | NLM_F_DUMP
  assert.equal(dv.getUint32(8, true), 7);
});

Deno.test("rtnl: address messages give IFA_LOCAL, else IFA_ADDRESS, per family", () => {
  const v6 = [0x20, 0x01, 0x0d, 0xb8, ...Array(11).fill(0), 9];
  const buf = concat(
    // Point-to-point: IFA_ADDRESS is the peer, IFA_LOCAL ours.
    addrMsg(RTM_NEWADDR, 2, [[1, [198, 18, 0, 99]], [2, [198, 18, 0, 1]]]),
    addrMsg(RTM_NEWADDR, 10, [[1, v6]]),
    addrMsg(RTM_DELADDR, 2, [[1, [198, 18, 5, 7]]]),
    addrMsg(RTM_NEWADDR, 17, [[1, [1, 2, 3, 4]]]), // AF_PACKET: skipped
    done(),
  );
  const seen: [number, string][] = [];
  assert.equal(parseAddrMessages(buf, buf.length, (t, a) => seen.push([t, a])), "done");
  assert.deepEqual(seen, [
    [RTM_NEWADDR, "198.18.0.1"],
    [RTM_NEWADDR, "2001:db8::9"],
    [RTM_DELADDR, "198.18.5.7"],
  ]);
  // Without NLMSG_DONE the dump goes on in the next buffer.
  const part = addrMsg(RTM_NEWADDR, 2, [[2, [198, 18, 0, 1]]]);
  assert.equal(parseAddrMessages(part, part.length, () => {}), "more");
});
