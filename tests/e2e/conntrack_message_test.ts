/**
 * The real libnetfilter_conntrack, used in user space only: what
 * nfct_nlmsg_build writes for a tuple must leave room for the CTA_ID our
 * client appends. It needs the library, so it runs with the e2e suite, not
 * with the unit tests (which refuse native loading).
 */
import assert from "node:assert/strict";
import { e2eTest } from "../netns.ts";
import {
  appendIdAttr,
  CTA_ID,
  parseIpv4,
  putDeleteHeader,
  swap16,
} from "../../ffi/conntrack/wire.ts";
import { ATTR, loadConntrackLibs } from "../../ffi/conntrack/libconntrack.ts";
import { align4 } from "../../ffi/netlink/message.ts";

const LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// Pure user-space use of the library (no kernel access): the message
// nfct_nlmsg_build produces for a tuple, and CTA_ID appended after it.
e2eTest("nfct_nlmsg_build output plus CTA_ID is a well-formed delete request", () => {
  const libs = loadConntrackLibs();
  const n = libs.nfct;
  const ct = n.nfct_new();
  assert.ok(ct !== null);
  try {
    n.nfct_set_attr_u8(ct, ATTR.ORIG_L3PROTO, 2);
    n.nfct_set_attr_u8(ct, ATTR.ORIG_L4PROTO, 17);
    n.nfct_set_attr_u32(ct, ATTR.ORIG_IPV4_SRC, parseIpv4("198.18.0.1"));
    n.nfct_set_attr_u32(ct, ATTR.ORIG_IPV4_DST, parseIpv4("198.18.0.2"));
    n.nfct_set_attr_u16(ct, ATTR.ORIG_PORT_SRC, swap16(1000));
    n.nfct_set_attr_u16(ct, ATTR.ORIG_PORT_DST, swap16(53));
    n.nfct_set_attr_u16(ct, ATTR.ZONE, 0);
    const buf = new Uint8Array(512);
    const dv = new DataView(buf.buffer);
    putDeleteHeader(dv, 0, 1, 2);
    assert.equal(n.nfct_nlmsg_build(Deno.UnsafePointer.of(buf), ct), 0);
    const len = appendIdAttr(dv, 0, 0x11223344);
    // Walk the top-level attributes: they must tile the message exactly.
    const types: number[] = [];
    let off = 20;
    while (off < len) {
      const alen = dv.getUint16(off, LE);
      assert.ok(alen >= 4 && off + alen <= len);
      types.push(dv.getUint16(off + 2, LE) & 0x3fff); // strip NLA_F_NESTED
      off += align4(alen);
    }
    assert.equal(off, len);
    // CTA_TUPLE_ORIG (1), CTA_ZONE (18), then our CTA_ID (12); 1.0.9 adds no id itself.
    assert.deepEqual(types, [1, 18, CTA_ID]);
    assert.equal(dv.getUint32(len - 4, false), 0x11223344);
    // The tuple carries both addresses in network order.
    const hex = Array.from(buf.subarray(0, len), (b) => b.toString(16).padStart(2, "0")).join("");
    assert.ok(hex.includes("c6120001") && hex.includes("c6120002") && hex.includes("03e8"));
  } finally {
    n.nfct_destroy(ct);
  }
});
