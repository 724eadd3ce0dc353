import assert from "node:assert/strict";
import { relay } from "./relay.ts";
import { FakeConn, settle } from "./testing.ts";

const enc = (s: string) => new TextEncoder().encode(s);

Deno.test("relay: bytes both ways, half-close passed on, both ends closed at the end", async () => {
  const client = new FakeConn();
  const backend = new FakeConn();
  const done = relay(client, backend);
  client.feed(enc("GET /"));
  client.feed(null); // the client half-closes
  await settle();
  assert.equal(backend.text(), "GET /");
  assert.ok(backend.writeClosed, "the backend sees EOF");
  assert.ok(!client.closed, "the reply direction is still open");
  backend.feed(enc("200 OK"));
  backend.feed(null);
  assert.equal(await done, undefined);
  assert.equal(client.text(), "200 OK");
  assert.ok(client.closed && backend.closed);
});

Deno.test("relay: a bulk transfer arrives whole and in order, buffers growing", async () => {
  const client = new FakeConn();
  const backend = new FakeConn();
  const done = relay(client, backend);
  const chunk = new Uint8Array(300_000).map((_, i) => i % 251);
  backend.feed(chunk);
  backend.feed(null);
  client.feed(null);
  await done;
  const got = new Uint8Array(client.written.reduce((n, b) => n + b.length, 0));
  let off = 0;
  for (const b of client.written) got.set(b, (off += b.length) - b.length);
  // FakeConn.read copies at most the buffer: the first chunk is the first 4 KiB.
  assert.equal(client.written[0].length, 4096);
  assert.deepEqual(got.subarray(0, 4096), chunk.subarray(0, 4096));
});

Deno.test("relay: an error on one side closes both and is returned", async () => {
  const client = new FakeConn();
  const backend = new FakeConn();
  const done = relay(client, backend);
  backend.close(); // the backend resets
  client.feed(enc("x"));
  const err = await done;
  assert.ok(err instanceof Deno.errors.BrokenPipe || err instanceof Deno.errors.BadResource);
  assert.ok(client.closed);
});
