import assert from "node:assert/strict";
import { openHostAddresses } from "./host_addresses.ts";
import { Logger } from "./log.ts";

const quiet = () => new Logger({ sink: { out: () => {}, err: () => {} } });
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("host addresses: read at open; a reported change re-reads and asks for a sync", async () => {
  let addrs = ["198.18.0.1"], pending = false, closed = false;
  const src = openHostAddresses(quiet(), {
    pollMs: 5,
    subscribe: () => ({ drain: () => [pending, pending = false][0], close: () => closed = true }),
    read: () => [...addrs],
  });
  let syncs = 0;
  src.watch(() => syncs++);
  assert.deepEqual(src.current(), ["198.18.0.1"]);
  // Nothing reported: no re-read, no sync, even if the list changed behind its back.
  addrs = ["198.18.0.1", "198.18.6.1"];
  await tick(30);
  assert.equal(syncs, 0);
  assert.deepEqual(src.current(), ["198.18.0.1"]);
  pending = true;
  await tick(30);
  assert.equal(syncs, 1);
  assert.deepEqual(src.current(), ["198.18.0.1", "198.18.6.1"]);
  // A notification that changes nothing (an address flag) asks for no sync.
  pending = true;
  await tick(30);
  assert.equal(syncs, 1);
  src.close();
  assert.ok(closed);
});

Deno.test("host addresses: without rtnetlink, current() is undefined and the agent goes on", () => {
  const lines: string[] = [];
  const sink = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
  const src = openHostAddresses(new Logger({ sink }), {
    subscribe: () => {
      throw new Error("netlink socket: Protocol not supported");
    },
  });
  assert.equal(src.current(), undefined);
  src.watch(() => assert.fail("no watch without a socket"));
  src.close();
  assert.ok(lines.some((l) => l.includes("interface addresses")), lines.join("\n"));
});

Deno.test("host addresses: a failed re-read keeps the previous list", async () => {
  let fail = false, pending = false;
  const src = openHostAddresses(quiet(), {
    pollMs: 5,
    subscribe: () => ({ drain: () => [pending, pending = false][0], close: () => {} }),
    read: () => {
      if (fail) throw new Error("netlink address dump: No buffer space available");
      return ["198.18.0.1"];
    },
  });
  let syncs = 0;
  src.watch(() => syncs++);
  fail = pending = true;
  await tick(30);
  assert.equal(syncs, 0);
  assert.deepEqual(src.current(), ["198.18.0.1"]);
  src.close();
});
