import assert from "node:assert/strict";
import type { Operation } from "../types.ts";
import { encodeBatch, encodeValue, layoutOf, parseFields } from "./codec.ts";

const hex = (b: Uint8Array | undefined) =>
  b === undefined ? undefined : [...b].map((x) => x.toString(16).padStart(2, "0")).join("");

Deno.test("codec: each datatype, alone and in a concatenation (4-byte fields)", () => {
  const f = (t: string, typeOf = false) => parseFields(t, typeOf)!;
  assert.equal(hex(encodeValue(f("ipv4_addr"), ["198.19.0.10"])), "c613000a");
  assert.equal(hex(encodeValue(f("inet_service"), ["80"])), "0050");
  assert.equal(
    hex(encodeValue(f("ipv6_addr"), ["2001:db8::1"])),
    "20010db8000000000000000000000001",
  );
  // addr . proto . port: the proto and port fields are padded to 4 bytes.
  assert.equal(
    hex(encodeValue(f("ipv4_addr . inet_proto . inet_service"), ["198.19.0.10 . tcp . 80"])),
    "c613000a" + "06000000" + "00500000",
  );
  // typeof with numgen: the bucket is a host-order u32; parts may be split across key items.
  const key = f("ip daddr . meta l4proto . th dport . numgen random mod 1", true);
  assert.equal(
    hex(encodeValue(key, ["198.19.0.10 . udp . 53", "3"])),
    "c613000a" + "11000000" + "00350000" + "03000000",
  );
  assert.equal(
    hex(encodeValue(f("ip daddr . sctp dport", true), ["198.18.1.2 . 8080"])),
    "c6120102" + "1f900000",
  );
  assert.equal(hex(encodeValue(f("mark"), ["0x00004000"])), "00400000");
  // Wrong shapes are refused, not guessed.
  assert.equal(encodeValue(f("ipv4_addr"), ["2001:db8::1"]), undefined);
  assert.equal(encodeValue(f("ipv4_addr"), ["198.19.0.256"]), undefined);
  assert.equal(encodeValue(f("inet_service"), ["65536"]), undefined);
  assert.equal(encodeValue(f("ipv4_addr . inet_proto"), ["198.19.0.1"]), undefined);
  assert.equal(parseFields("ipv4_addr . ether_addr", false), undefined);
});

Deno.test("codec: set layouts; intervals and unknown types are left to libnftables", () => {
  assert.deepEqual(layoutOf({ kind: "set", name: "s", type: "ipv4_addr" })?.key, [
    { kind: "ipv4", len: 4 },
  ]);
  assert.equal(
    layoutOf({ kind: "set", name: "s", type: "ipv4_addr", flags: ["interval"] }),
    undefined,
  );
  const m = layoutOf({
    kind: "map",
    name: "m",
    type: "typeof ip daddr . meta l4proto . th dport . numgen random mod 1",
    dataType: "ip daddr . tcp dport",
  })!;
  assert.equal(m.key.length, 4);
  assert.deepEqual(m.data!.map((f) => f.kind), ["ipv4", "service"]);
  const v = layoutOf({
    kind: "map",
    name: "v",
    type: "inet_proto . inet_service",
    dataType: "verdict",
  })!;
  assert.deepEqual(v.data, [{ kind: "verdict", len: 0 }]);
});

/** Walks netlink messages: [type, flags, seq, payload] each. */
function messages(b: Uint8Array): [number, number, number, DataView][] {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out: [number, number, number, DataView][] = [];
  for (let off = 0; off < b.length;) {
    const len = v.getUint32(off, true);
    out.push([
      v.getUint16(off + 4, true),
      v.getUint16(off + 6, true),
      v.getUint32(off + 8, true),
      new DataView(b.buffer, b.byteOffset + off + 20, len - 20),
    ]);
    off += (len + 3) & ~3;
  }
  return out;
}

Deno.test("codec: a batch is begin, one message per run of a verb on a set, end", () => {
  const layouts = {
    "service-ips": layoutOf({
      kind: "map",
      name: "service-ips",
      type: "ipv4_addr . inet_proto . inet_service",
      dataType: "verdict",
    }),
    "cluster-ips": layoutOf({ kind: "set", name: "cluster-ips", type: "ipv4_addr" }),
  } as Record<string, ReturnType<typeof layoutOf>>;
  const ops: Operation[] = [
    { verb: "delete", obj: { kind: "element", set: "cluster-ips", key: ["198.19.0.9"] } },
    {
      verb: "add",
      obj: {
        kind: "element",
        map: "service-ips",
        key: ["198.19.0.10 . tcp . 80"],
        value: ["goto dnat-tcp-2"],
        comment: "ns/web:http",
      },
    },
    { verb: "add", obj: { kind: "element", set: "cluster-ips", key: ["198.19.0.10"] } },
  ];
  const b = encodeBatch("ip", "kube-proxy", ops, (n) => layouts[n], 7)!;
  const ms = messages(b.bytes);
  assert.deepEqual(ms.map(([t, f, s]) => [t.toString(16), f.toString(16), s]), [
    ["10", "1", 7], // NFNL_MSG_BATCH_BEGIN
    ["a00", "9", 8], // NEWTABLE, REQUEST|ECHO: no change, the commit's NEWGEN echoed
    ["a0e", "5", 9], // DELSETELEM, REQUEST|ACK
    ["a0c", "405", 10], // NEWSETELEM, REQUEST|ACK|CREATE
    ["a0c", "405", 11],
    ["11", "1", 12], // NFNL_MSG_BATCH_END
  ]);
  assert.deepEqual(b.seqs, [9, 10, 11]);
  assert.deepEqual(b.firstOp, [0, 1, 2]);
  // The verdict element carries goto (-4, big endian), the chain name and the comment TLV.
  const text = new TextDecoder().decode(b.bytes);
  assert.ok(text.includes("dnat-tcp-2\0"));
  assert.ok(text.includes("\x00\x0cns/web:http\0"), "comment as TLV type 0, length with NUL");
  assert.ok(hex(b.bytes)!.includes("fffffffc"), "NFT_GOTO");
  // Anything but element adds and deletes, or an unknown set, is not encoded.
  assert.equal(encodeBatch("ip", "kube-proxy", ops, () => undefined, 1), undefined);
  assert.equal(
    encodeBatch(
      "ip",
      "kube-proxy",
      [{ verb: "flush", obj: { kind: "map", name: "m", type: "", dataType: "" } }],
      (n) => layouts[n],
      1,
    ),
    undefined,
  );
});

Deno.test("codec: comments are UTF-8 with their NUL; one too long for a TLV is left to libnftables", () => {
  const layout = layoutOf({ kind: "set", name: "cluster-ips", type: "ipv4_addr" });
  const el = (comment: string): Operation => ({
    verb: "add",
    obj: { kind: "element", set: "cluster-ips", key: ["198.19.0.1"], comment },
  });
  const b = encodeBatch("ip", "kube-proxy", [el("ns/café:p")], () => layout, 1)!;
  const utf8 = new TextEncoder().encode("ns/café:p");
  const at = b.bytes.findIndex((_, i) => utf8.every((c, j) => b.bytes[i + j] === c));
  assert.ok(at > 1, "the UTF-8 text is in the batch");
  assert.equal(b.bytes[at - 2], 0, "TLV type 0: comment");
  assert.equal(b.bytes[at - 1], utf8.length + 1, "TLV length counts the NUL");
  assert.equal(b.bytes[at + utf8.length], 0, "NUL-terminated");
  assert.ok(encodeBatch("ip", "kube-proxy", [el("x".repeat(254))], () => layout, 1));
  assert.equal(encodeBatch("ip", "kube-proxy", [el("x".repeat(255))], () => layout, 1), undefined);
});
