import assert from "node:assert/strict";
import type { Element, Operation } from "../types.ts";
import { encodeBatch, parseFields, type SetLayout } from "./codec.ts";
import { decodeBatch, elementText } from "./batch_decode_testing.ts";

const f = (t: string) => parseFields(t, false)!;
const LAYOUTS: Record<string, SetLayout> = {
  "service-ips": { key: f("ipv4_addr . inet_proto . inet_service"), data: f("verdict") },
  "endpoints": { key: f("ipv6_addr . inet_service"), data: f("ipv6_addr . inet_service") },
  "cluster-ips": { key: f("ipv4_addr") },
};
const layoutOf = (s: string) => LAYOUTS[s];

const el = (set: string, key: string, o: Partial<Element> = {}): Element => ({
  kind: "element",
  ...(LAYOUTS[set].data ? { map: set } : { set }),
  key: [key],
  ...o,
});
const OPS: Operation[] = [
  { verb: "delete", obj: el("cluster-ips", "198.19.0.30") },
  {
    verb: "add",
    obj: el("service-ips", "198.19.0.1 . tcp . 80", {
      value: ["goto dnat-tcp-1"],
      comment: "a/b:p",
    }),
  },
  { verb: "add", obj: el("endpoints", "2001:db8::1 . 443", { value: ["2001:db8:130::9 . 8443"] }) },
  { verb: "add", obj: el("cluster-ips", "198.19.0.1", { comment: "a/b" }) },
];
const encode = (ops = OPS) => encodeBatch("ip", "kube-proxy", ops, layoutOf, 7)!.bytes.slice();

Deno.test("batch decode: what the production encoder builds reads back as nft lines", () => {
  assert.deepEqual(decodeBatch(encode(), layoutOf), [
    "batch begin",
    "echo generation: table ip kube-proxy",
    "delete element ip kube-proxy cluster-ips { 198.19.0.30 }",
    'add element ip kube-proxy service-ips { 198.19.0.1 . tcp . 80 comment "a/b:p" : goto dnat-tcp-1 }',
    "add element ip kube-proxy endpoints { 2001:db8::1 . 443 : 2001:db8:130::9 . 8443 }",
    'add element ip kube-proxy cluster-ips { 198.19.0.1 comment "a/b" }',
    "batch end",
  ]);
});

/** The offset of `needle` in `hay` (asserted present). */
function find(hay: Uint8Array, needle: number[]): number {
  for (let i = 0; i + needle.length <= hay.length; i++) {
    if (needle.every((b, j) => hay[i + j] === b)) return i;
  }
  throw new Error("needle not found");
}

Deno.test("batch decode: a wrong encoding changes the text (the golden would catch it)", () => {
  const good = decodeBatch(encode(), layoutOf);
  // A port in host order: 198.19.0.1 . tcp . 80 becomes port 20480.
  const flipped = encode();
  const key = find(flipped, [198, 19, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0]);
  [flipped[key + 8], flipped[key + 9]] = [80, 0];
  const portLine = decodeBatch(flipped, layoutOf)[3];
  assert.notDeepEqual(decodeBatch(flipped, layoutOf), good);
  assert.match(portLine, /198\.19\.0\.1 \. tcp \. 20480 /);
  // An encoder that drops the comment.
  const noComment = OPS.map((o) => ({ ...o, obj: { ...o.obj, comment: undefined } as Element }));
  const dropped = decodeBatch(encode(noComment), layoutOf);
  assert.notDeepEqual(dropped, good);
  assert.equal(
    dropped[3],
    "add element ip kube-proxy service-ips { 198.19.0.1 . tcp . 80 : goto dnat-tcp-1 }",
  );
  // A comment TLV with a wrong length, a verdict code that is not goto.
  const badUd = encode();
  const ud = find(badUd, [0, 6, ...new TextEncoder().encode("a/b:p")]);
  badUd[ud + 1] = 3;
  assert.match(decodeBatch(badUd, layoutOf)[3], /\?userdata 0x0003612f623a7000/);
  const badVerdict = encode();
  badVerdict[find(badVerdict, [0xff, 0xff, 0xff, 0xfc]) + 3] = 0xfd; // goto → jump
  assert.match(decodeBatch(badVerdict, layoutOf)[3], /: jump dnat-tcp-1 }$/);
});

Deno.test("batch decode: framing faults are noted, not skipped", () => {
  const bytes = encode();
  // NEWSETELEM without NLM_F_CREATE (the fourth message: after begin, the echo and the delete).
  const noCreate = bytes.slice();
  const dv = new DataView(noCreate.buffer);
  const del = 20 + ((dv.getUint32(20, true) + 3) & ~3);
  const second = del + ((dv.getUint32(del, true) + 3) & ~3);
  noCreate[second + 7] &= ~0x04; // NLM_F_CREATE is 0x400: bit 2 of the flags' high byte
  assert.match(decodeBatch(noCreate, layoutOf)[3], /^add \?flags 0x5 element/);
  // A sequence gap, trailing bytes, a set whose layout is not known.
  const gap = bytes.slice();
  gap[second + 8] += 1;
  assert.ok(decodeBatch(gap, layoutOf).some((l) => l.startsWith("?seq ")));
  const trailing = new Uint8Array(bytes.length + 8);
  trailing.set(bytes);
  assert.equal(decodeBatch(trailing, layoutOf).at(-1), "?8 trailing bytes");
  assert.equal(
    decodeBatch(bytes, (s) => s === "cluster-ips" ? undefined : layoutOf(s))[2],
    "delete element ip kube-proxy cluster-ips ?unknown set layout",
  );
});

Deno.test("batch decode: timeouts and unknown element attributes", () => {
  const attr = (type: number, v: number[]) => [4 + v.length, 0, type, 0, ...v];
  const key = [12, 0, 1, 0x80, ...attr(1, [198, 19, 0, 30])]; // nested KEY { VALUE }
  const timeout = attr(4, [0, 0, 0, 0, 0, 0, 0x75, 0x30]);
  const odd = attr(9, [1, 2, 3, 4]);
  const text = elementText(
    new Uint8Array([...key, ...timeout, ...odd]),
    LAYOUTS["cluster-ips"],
    "cluster-ips",
  );
  assert.equal(text, "198.19.0.30 timeout 30000ms ?attr9");
});
