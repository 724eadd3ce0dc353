import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { Transaction } from "../../ffi/nftables/types.ts";
import { buildContext } from "./context.ts";
import { Proxier } from "./proxier.ts";
import { rehearse } from "./rehearsal.ts";
import { mallocTrim } from "../../ffi/malloc_trim.ts";
import { CFG, ep, state, svc } from "./testing.ts";
import type { WrittenState } from "./written_state.ts";

const NO_STALE = { servicesWithNewEndpoints: [], deletedEndpoints: [] };

/** Four TCP service ports on their own ClusterIPs, three endpoints each. */
function cluster() {
  const ports = [1, 2, 3, 4].map((i) => svc(`ns/s${i}:http`, { clusterIP: `198.19.0.${i}` }));
  const eps = Object.fromEntries(
    ports.map((p, i) => [p.id, [1, 2, 3].map((j) => ep(`198.18.130.${i * 10 + j}`))]),
  );
  return state(ports, eps);
}

/** Every field of the written state, as text. */
function snapshot(w: WrittenState): string {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(w)) out[k] = v instanceof Map ? [...v] : v;
  return JSON.stringify(out);
}

/** A memory client that also records what it was asked to rehearse. */
class Rehearsing extends MemoryNftables {
  rehearsed: Transaction[] = [];
  rehearse(tx: Transaction): boolean {
    this.rehearsed.push(tx);
    return true;
  }
}

Deno.test("rehearse: plans pretend changes and a deletion, and leaves the written state and the kernel alone", async () => {
  const st = cluster();
  const fake = new Rehearsing("ip", "kube-proxy");
  const p = new Proxier({ client: fake, config: CFG, trimMemory: false });
  await p.sync({ state: st, changed: new Set(), deleted: new Set(), stale: NO_STALE });
  const before = { written: snapshot(p.written), kernel: fake.dump() };
  fake.rehearsed = [];

  const r = rehearse(p.written, st, buildContext(st, CFG), fake, 0);

  // Two of the four ports lose an endpoint and two are scaled to one; the last is also planned as
  // deleted, and a copy of the first as a new port on 0.0.0.0.
  assert.equal(r.plans, 6);
  assert.equal(r.ops, fake.rehearsed.reduce((n, tx) => n + tx.size, 0));
  assert.equal(r.encoded, fake.rehearsed.length);
  const elements = fake.rehearsed.flatMap((tx) => tx.ops).filter((o) => o.obj.kind === "element");
  assert.ok(elements.some((o) => o.verb === "delete"), "an endpoint leaving deletes elements");
  assert.ok(
    elements.some((o) =>
      o.verb === "add" && o.obj.kind === "element" && o.obj.key[0] === "0.0.0.0"
    ),
    "the new port adds its ClusterIP",
  );
  assert.equal(snapshot(p.written), before.written);
  assert.equal(fake.dump(), before.kernel);
});

Deno.test("rehearse: nothing to do before a full sync, or for a client that cannot rehearse", () => {
  const st = cluster();
  const fresh = new Proxier({
    client: new MemoryNftables("ip", "kube-proxy"),
    trimMemory: false,
    config: CFG,
  });
  const ctx = buildContext(st, CFG);
  const none = { plans: 0, ops: 0, encoded: 0 };
  assert.deepEqual(rehearse(fresh.written, st, ctx, new Rehearsing("ip", "t"), 0), none);
  assert.deepEqual(rehearse(fresh.written, st, ctx, {}, 0), none);
});

Deno.test("Proxier: rehearses once, after its first full sync, off the sync's path", async () => {
  const st = cluster();
  const fake = new Rehearsing("ip", "kube-proxy");
  const lines: string[] = [];
  const p = new Proxier({
    client: fake,
    config: CFG,
    trimMemory: false,
    log: (_level, msg) => lines.push(msg),
  });
  await p.sync({ state: st, changed: new Set(), deleted: new Set(), stale: NO_STALE });
  assert.equal(fake.rehearsed.length, 0, "not within the sync");
  await new Promise((r) => setTimeout(r, 10));
  const first = fake.rehearsed.length;
  assert.ok(first > 0);
  assert.ok(lines.includes("Rehearsed the partial path"));

  p.requestFullSync("test");
  await p.sync({ state: st, changed: new Set(), deleted: new Set(), stale: NO_STALE });
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(fake.rehearsed.length, first, "once only");
});

Deno.test("warmUp: rehearses after a full sync, and again only once memory was trimmed", async () => {
  const st = cluster();
  const fake = new Rehearsing("ip", "kube-proxy");
  const p = new Proxier({ client: fake, config: CFG, trimMemory: false });
  await p.sync({ state: st, changed: new Set(), deleted: new Set(), stale: NO_STALE });
  await new Promise((r) => setTimeout(r, 10)); // the sync schedules its warm-up
  const once = fake.rehearsed.length;
  assert.ok(once > 0, "the full sync warmed the partial path up");

  p.warmUp();
  assert.equal(fake.rehearsed.length, once, "nothing was trimmed since: no second rehearsal");

  mallocTrim(); // hands memory back (here: no gc, no libc), so the path is cold again
  p.warmUp();
  assert.equal(fake.rehearsed.length, 2 * once);
});
