import assert from "node:assert/strict";
import type { LogLevel } from "../../../net/log.ts";
import type { NftNotification } from "./notify.ts";
import { OwnSockets, type PortidSource } from "./own_sockets.ts";

/** A port id source: `watched` is what a re-read sees, `all` what a full scan sees. */
function source(watched: number[], all: number[] = watched) {
  const s = {
    watched: new Set(watched),
    all: new Set(all),
    reads: 0,
    scans: 0,
    portids() {
      s.reads++;
      return new Set(s.watched);
    },
    rescan() {
      s.scans++;
      s.watched = new Set(s.all);
      return new Set(s.all);
    },
  };
  return s satisfies PortidSource;
}

const rule = (portid: number): NftNotification => ({
  kind: "rule",
  op: "new",
  portid,
  family: 2,
  table: "t",
  name: "c",
});
const gen = (portid: number, pid: number): NftNotification => ({
  kind: "gen",
  op: "new",
  portid,
  family: 0,
  table: "",
  name: "",
  pid,
  proc: "deno",
});

function clock() {
  const c = { t: 0, now: () => c.t };
  return c;
}

Deno.test("OwnSockets: our port ids are dropped without reading anything", () => {
  const s = source([10]);
  const own = new OwnSockets(s, { isOurTask: () => false });
  assert.equal(s.scans, 1, "one scan at the start");
  assert.deepEqual(own.foreign([rule(10), gen(10, 1)]), { foreign: [], changed: false });
  assert.deepEqual([s.reads, s.scans], [0, 1]);
});

Deno.test("OwnSockets: a socket bound since is found by a re-read, not a scan", () => {
  const s = source([10]);
  const own = new OwnSockets(s, { isOurTask: () => false });
  // libnftables' first command bound its (watched) socket.
  s.watched.add(11);
  s.all.add(11);
  const r = own.foreign([rule(11), rule(99)]);
  assert.deepEqual(r.foreign.map((m) => m.portid), [99]);
  assert.equal(r.changed, true);
  assert.deepEqual([...own.ids].sort(), [10, 11]);
  assert.equal(s.reads, 1);
  assert.equal(s.scans, 2, "99 is still unknown: one full scan");
});

Deno.test("OwnSockets: a socket at a high descriptor (not watched) is found by the full scan", () => {
  const s = source([10]);
  const c = clock();
  const own = new OwnSockets(s, { now: c.now, isOurTask: () => false });
  c.t = 5000;
  s.all = new Set([10, 12]); // libnftables reopened its socket at fd 5000
  const r = own.foreign([rule(12), gen(12, 1)]);
  assert.deepEqual(r, { foreign: [], changed: true });
  assert.equal(s.scans, 2);
});

Deno.test("OwnSockets: a burst of foreign batches scans once; a foreign port id never again", () => {
  const s = source([10]);
  const c = clock();
  const own = new OwnSockets(s, { now: c.now, rescanIntervalMs: 1000, isOurTask: () => false });
  c.t = 10_000;
  for (let i = 0; i < 50; i++) {
    c.t += 10;
    assert.equal(own.foreign([rule(100 + i), gen(100 + i, 1)]).foreign.length, 2);
  }
  assert.equal(s.scans, 2, "the initial scan and one for the burst");
  c.t += 5000;
  own.foreign([rule(100)]);
  assert.equal(s.scans, 2, "port id 100 was scanned for already");
  own.foreign([rule(200)]);
  assert.equal(s.scans, 3, "a new port id after the interval: one scan");
});

Deno.test("OwnSockets: port id 0 (the kernel) is never ours and never scanned for", () => {
  const s = source([10]);
  const own = new OwnSockets(s, { isOurTask: () => true });
  assert.equal(own.foreign([rule(0), gen(0, 1)]).foreign.length, 2);
  assert.deepEqual([s.reads, s.scans], [0, 1]);
});

Deno.test("OwnSockets: a batch one of our threads committed is ours, logged once", () => {
  const s = source([10]);
  const lines: [LogLevel, string, Record<string, unknown> | undefined][] = [];
  const own = new OwnSockets(s, {
    isOurTask: (pid) => pid === 4321,
    log: (level, msg, fields) => lines.push([level, msg, fields]),
  });
  // A socket opened and closed between two scans: no scan can find it.
  const r = own.foreign([rule(77), gen(77, 4321)]);
  assert.deepEqual(r, { foreign: [], changed: true });
  assert.equal(lines.length, 1);
  assert.equal(lines[0][0], "warn");
  assert.match(lines[0][1], /counts as ours/);
  assert.deepEqual(lines[0][2], { portid: 77, thread: 4321, proc: "deno" });
  // From now on it is ours without any reading, and is not logged again.
  const reads = s.reads;
  assert.deepEqual(own.foreign([rule(77)]), { foreign: [], changed: false });
  assert.equal(s.reads, reads);
  assert.deepEqual(own.foreign([rule(78), gen(78, 4321)]).foreign, []);
  assert.equal(lines.length, 1, "logged once");
  // The adopted port ids survive a re-read.
  s.watched.add(11);
  own.foreign([rule(11)]);
  assert.ok(own.ids.has(77) && own.ids.has(78) && own.ids.has(11));
  // Another process's batch stays foreign.
  assert.equal(own.foreign([rule(90), gen(90, 555)]).foreign.length, 2);
});

Deno.test("OwnSockets without libc: every notification is foreign", () => {
  const own = new OwnSockets(null);
  assert.equal(own.foreign([rule(10)]).foreign.length, 1);
  assert.equal(own.ids.size, 0);
});

Deno.test("OwnSockets: after a slow scan (a huge fd table) the next waits 50 times as long", () => {
  const c = clock();
  const s = source([10]);
  const rescan = s.rescan;
  s.rescan = () => {
    c.t += 100; // 100 ms: some 30k descriptors
    return rescan();
  };
  const own = new OwnSockets(s, { now: c.now, rescanIntervalMs: 1000, isOurTask: () => false });
  c.t = 10_000;
  own.foreign([rule(100)]);
  assert.equal(s.scans, 2);
  c.t += 4_000;
  own.foreign([rule(101)]);
  assert.equal(s.scans, 2, "4 s after a 100 ms scan: none");
  c.t += 1_100;
  own.foreign([rule(102)]);
  assert.equal(s.scans, 3, "5 s after: one");
});

Deno.test("OwnSockets.follow: a scan someone else runs adds its sockets before any notification", () => {
  const listeners = new Set<(ids: Set<number>) => void>();
  const s = {
    ...source([10]),
    scanned(ids: number[]) {
      for (const l of listeners) l(new Set(ids));
    },
    subscribe(l: (ids: Set<number>) => void) {
      listeners.add(l);
      return () => void listeners.delete(l);
    },
  };
  const own = new OwnSockets(s, { isOurTask: () => false });
  let changes = 0;
  const unfollow = own.follow(() => changes++);
  s.scanned([10, 11]); // a client opened a socket and scanned
  assert.equal(changes, 1);
  assert.deepEqual([...own.ids].sort(), [10, 11]);
  // Its batch is ours at once, with no re-read or scan.
  const { reads, scans } = s;
  assert.deepEqual(own.foreign([rule(11)]), { foreign: [], changed: false });
  assert.deepEqual([s.reads, s.scans], [reads, scans]);
  s.scanned([10, 11]); // nothing new: no change reported
  assert.equal(changes, 1);
  unfollow();
  s.scanned([10, 11, 12]);
  assert.equal(changes, 1);
  assert.equal(own.ids.has(12), false);
});

Deno.test("OwnSockets.follow: a source that cannot be followed is a no-op", () => {
  const own = new OwnSockets(source([10]), { isOurTask: () => false });
  let changes = 0;
  own.follow(() => changes++)();
  assert.equal(changes, 0);
});
