import assert from "node:assert/strict";
import { FakeConntrack } from "./fake.ts";
import { type ConntrackEntry, PROTO_TCP, PROTO_UDP } from "./types.ts";

const A = { origSrc: "198.18.0.1", origSport: 1000, origDst: "198.19.0.1", origDport: 53 };

Deno.test("fake fills defaults: UDP, reverse reply tuple, family from the address, fresh ids", () => {
  const ct = new FakeConntrack();
  const e = ct.add(A);
  assert.deepEqual(e, {
    family: 4,
    proto: PROTO_UDP,
    ...A,
    replySrc: "198.19.0.1",
    replyDst: "198.18.0.1",
    replySport: 53,
    replyDport: 1000,
    mark: 0,
    zone: 0,
    id: 1,
  });
  assert.equal(ct.add({ ...A, origSport: 1001 }).id, 2);
  assert.equal(ct.add({ ...A, origSrc: "2001:db8::1", origDst: "2001:db8::2" }).family, 6);
});

Deno.test("fake refuses a duplicate original tuple like the kernel", () => {
  const ct = new FakeConntrack([A]);
  assert.throws(() => ct.add({ ...A, replySrc: "198.18.9.9" }), /already exists \(EEXIST\)/);
  ct.add({ ...A, zone: 1 }); // another zone is another flow
  ct.add({ ...A, proto: PROTO_TCP });
  assert.equal(ct.size, 3);
});

Deno.test("fake dump filters by family and protocol and reuses one object", () => {
  const ct = new FakeConntrack([
    A,
    { ...A, origSport: 2, proto: PROTO_TCP },
    { ...A, origSrc: "2001:db8::1", origDst: "2001:db8::2" },
  ]);
  const seen: Readonly<ConntrackEntry>[] = [];
  const ports: number[] = [];
  const r = ct.dump(4, (e) => {
    seen.push(e);
    ports.push(e.origSport);
  });
  assert.deepEqual(r, { count: 2, interrupted: false });
  assert.deepEqual(ports, [1000, 2]);
  assert.equal(seen[0], seen[1], "the visitor must copy what it keeps");
  assert.equal(ct.dump(4, () => {}, PROTO_UDP).count, 1);
  assert.equal(ct.dump(6, () => {}).count, 1);
  assert.equal(ct.dumpCalls, 3);
});

Deno.test("fake dump can be interrupted once", () => {
  const ct = new FakeConntrack([A, { ...A, origSport: 2 }, { ...A, origSport: 3 }]);
  ct.interruptNextDumpAfter = 1;
  const ports: number[] = [];
  assert.deepEqual(ct.dump(4, (e) => ports.push(e.origSport)), { count: 1, interrupted: true });
  assert.deepEqual(ports, [1000]);
  assert.deepEqual(ct.dump(4, () => {}), { count: 3, interrupted: false });
});

Deno.test("fake delete matches the original tuple and a non-zero id, else ENOENT", () => {
  const ct = new FakeConntrack([A, { ...A, origSport: 2 }, { ...A, origSport: 3 }]);
  const [a, b, c] = ct.entries();
  const r = ct.delete([
    { ...a, id: 0 }, // id 0: tuple only
    { ...b, id: b.id + 100 }, // same tuple, another flow incarnation
    { ...c, replySrc: "198.18.7.7" }, // the reply tuple is not part of the key
    { ...a, origDport: 54 }, // no such tuple
  ]);
  assert.equal(r.deleted, 2);
  assert.deepEqual(r.failed.map((f) => [f.entry.origSport, f.entry.origDport, f.error]), [
    [2, 53, "ENOENT"],
    [1000, 54, "ENOENT"],
  ]);
  assert.deepEqual(ct.entries().map((e) => e.origSport), [2]);
  assert.deepEqual(ct.deleteBatches, [4]);
});

Deno.test("fake refuses use after close", () => {
  const ct = new FakeConntrack([A]);
  ct.close();
  assert.throws(() => ct.dump(4, () => {}), /used after close/);
  assert.throws(() => ct.delete([]), /used after close/);
});
