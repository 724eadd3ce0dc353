import assert from "node:assert/strict";
import { cstr, walkDump } from "./dump.ts";

Deno.test("walkDump: messages and their attributes; a truncated message ends the buffer", () => {
  // Two messages of type 0x0a06 (family 2) with one string attribute each, then 8 stray bytes.
  const msg = (s: string) => {
    const v = new TextEncoder().encode(s + "\0");
    const alen = 4 + v.length;
    const len = 20 + ((alen + 3) & ~3);
    const m = new Uint8Array(len);
    const dv = new DataView(m.buffer);
    dv.setUint32(0, len, true);
    dv.setUint16(4, 0x0a06, true);
    m[16] = 2;
    dv.setUint16(20, alen, true);
    dv.setUint16(22, 0x8002, true); // a flag bit, masked off
    m.set(v, 24);
    return m;
  };
  const a = msg("one"), b = msg("two");
  const buf = new Uint8Array(a.length + b.length + 8);
  buf.set(a);
  buf.set(b, a.length);
  const seen: string[] = [];
  const r = walkDump(buf, buf.length, (type, family, attrs) => {
    attrs((t, v) => seen.push(`${type.toString(16)}/${family}/${t}=${cstr(v)}`));
  });
  assert.equal(r, "more");
  assert.deepEqual(seen, ["a06/2/2=one", "a06/2/2=two"]);
});
