import assert from "node:assert/strict";
import { type FdProbe, type FdProber, OwnNetlinkSockets } from "./own_portids.ts";

/** A descriptor table: fd -> what probing it says; everything else is closed. */
function table(fds: Map<number, FdProbe>, limit: number): FdProber & { probes: number } {
  const t = {
    probes: 0,
    limit: () => limit,
    probe(fd: number): FdProbe {
      t.probes++;
      return fds.get(fd) ?? "closed";
    },
  };
  return t;
}

Deno.test("OwnNetlinkSockets.rescan: a socket past thousands of closed descriptors is found", () => {
  const fds = new Map<number, FdProbe>([[0, "other"], [1, "other"], [2, "other"], [5000, 77]]);
  const own = new OwnNetlinkSockets(table(fds, 8192));
  assert.deepEqual([...own.rescan()], [77]);
  assert.equal(own.scans, 1);
});

Deno.test("OwnNetlinkSockets: an unbound socket is watched, and its port id read once bound", () => {
  const fds = new Map<number, FdProbe>([[3, 0], [4, 10], [9, "other"]]);
  const t = table(fds, 64);
  const own = new OwnNetlinkSockets(t);
  // Port id 0 is the kernel's: an unbound socket (libnftables' before its first command).
  assert.deepEqual([...own.rescan()], [10]);
  assert.deepEqual([...own.watched.keys()], [3, 4]);
  fds.set(3, 4242); // libnftables' first command binds it
  fds.delete(4); // the raw writer closed its socket
  t.probes = 0;
  assert.deepEqual([...own.portids()], [4242]);
  assert.equal(t.probes, 2, "a re-read probes only the watched descriptors");
  assert.equal(own.scans, 1);
  assert.deepEqual([...own.watched.keys()], [3]);
});

Deno.test("OwnNetlinkSockets: a descriptor reused by something else is forgotten", () => {
  const fds = new Map<number, FdProbe>([[7, 99]]);
  const own = new OwnNetlinkSockets(table(fds, 16));
  own.rescan();
  fds.set(7, "other");
  assert.deepEqual([...own.portids()], []);
  assert.equal(own.watched.size, 0);
});

Deno.test("OwnNetlinkSockets.around: the unbound sockets `create` opened, none of the old", () => {
  const fds = new Map<number, FdProbe>([[3, 0], [4, 10]]);
  const own = new OwnNetlinkSockets(table(fds, 2048));
  const { value, fresh } = own.around(() => {
    fds.set(1500, 0); // nft_ctx_new's socket: created, not bound
    fds.set(1501, 12); // another socket, bound (the raw writer's)
    return "ctx";
  });
  assert.equal(value, "ctx");
  assert.deepEqual(fresh, [1500]);
  assert.deepEqual([...own.watched.keys()], [3, 4, 1500, 1501]);
});

Deno.test("OwnNetlinkSockets.subscribe: every full scan's port ids, until unsubscribed", () => {
  const fds = new Map<number, FdProbe>([[3, 100]]);
  const own = new OwnNetlinkSockets(table(fds, 64));
  const seen: number[][] = [];
  const off = own.subscribe((ids) => seen.push([...ids].sort()));
  own.rescan();
  fds.set(40, 200);
  own.rescan();
  own.portids(); // a re-read is not a scan
  off();
  own.rescan();
  assert.deepEqual(seen, [[100], [100, 200]]);
});
