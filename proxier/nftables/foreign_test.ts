import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { NftNotification } from "../../ffi/nftables/netlink/notify.ts";
import { type Element, Transaction } from "../../ffi/nftables/types.ts";
import type { ProxyState } from "../model.ts";
import { noStale } from "../../tests/support/synthetic.ts";
import { elementCheck, emptyTouched, mergeTouched, type Touched, touchedBy } from "./foreign.ts";
import { Proxier, type SyncResult } from "./proxier.ts";
import { CFG, ep, state, svc } from "./testing.ts";

const msg = (m: Partial<NftNotification>): NftNotification => ({
  kind: "element",
  op: "del",
  portid: 99,
  family: 2,
  table: "kube-proxy",
  name: "",
  ...m,
});

Deno.test("touchedBy maps a foreign batch to our objects, and ignores other tables and families", () => {
  const t = touchedBy(
    [
      msg({ kind: "rule", name: "services" }),
      msg({ kind: "chain", name: "intruder", op: "new" }),
      msg({ kind: "set", name: "cluster-ips" }),
      msg({ kind: "element", name: "service-ips" }),
      msg({ kind: "element", name: "x", table: "other" }),
      msg({ kind: "chain", name: "y", family: 10 }),
      msg({ kind: "gen", family: 0, table: "", genId: 7, pid: 42, proc: "nft" }),
    ],
    2,
    "kube-proxy",
  )!;
  assert.equal(t.table, false);
  assert.deepEqual([...t.chains].sort(), ["intruder", "services"]);
  assert.deepEqual([...t.sets], ["cluster-ips"]);
  assert.deepEqual([...t.elements], ["service-ips"]);
  assert.deepEqual([...t.by], ["nft (pid 42)"]);
  assert.equal(touchedBy([msg({ table: "other" })], 2, "kube-proxy"), undefined);
  assert.equal(touchedBy([msg({ kind: "table" })], 2, "kube-proxy")!.table, true);
  const m = mergeTouched(emptyTouched(), t);
  assert.ok(mergeTouched(m, { ...emptyTouched(), table: true }).table);
});

Deno.test("elementCheck: dispatch maps and shared sets are listed, bucket maps regenerate", () => {
  assert.equal(elementCheck("service-ips"), "list");
  assert.equal(elementCheck("cluster-ips"), "list");
  assert.equal(elementCheck("endpoints-tcp"), "regenerate");
  assert.equal(elementCheck("nodeport-endpoints-udp-g3"), "regenerate");
  assert.equal(elementCheck("affinity-xyz"), "ignore");
});

/** A memory table that counts what a check lists. */
class CountingNftables extends MemoryNftables {
  listed: string[] = [];
  chainLists = 0;
  override listElements(kind: "set" | "map", name: string): Promise<Element[]> {
    this.listed.push(name);
    return super.listElements(kind, name);
  }
  override listChains(): Promise<string[]> {
    this.chainLists++;
    return super.listChains();
  }
}

function setup() {
  const clock = { t: 1000 };
  const fake = new CountingNftables("ip", "kube-proxy");
  const p = new Proxier({ client: fake, config: CFG, now: () => clock.t, trimMemory: false });
  return { fake, p, clock };
}

async function sync(p: Proxier, s: ProxyState): Promise<SyncResult> {
  return await p.sync({ state: s, changed: new Set(), deleted: new Set(), stale: noStale() });
}

const web = svc("default/web:p", { clusterIP: "198.19.0.10", nodePort: 30080 });
const sticky = svc("default/sticky:p", { clusterIP: "198.19.0.11", stickyMaxAgeSeconds: 10800 });
const two = () =>
  state([web, sticky], {
    [web.id]: [ep("198.18.129.2"), ep("198.18.129.3")],
    [sticky.id]: [ep("198.18.129.2"), ep("198.18.129.3")],
  });
const touched = (t: Partial<Touched>): Touched => ({ ...emptyTouched(), ...t });

Deno.test("an idle sync reads nothing from the kernel", async () => {
  const { fake, p } = setup();
  await sync(p, two());
  fake.listed = [];
  fake.chainLists = 0;
  const r = await sync(p, two());
  assert.equal(r.full, false);
  assert.equal(r.ops, 0);
  assert.deepEqual(fake.listed, []);
  assert.equal(fake.chainLists, 0);
});

Deno.test("a deleted class-set element: only that set is listed, and it is restored", async () => {
  const { fake, p } = setup();
  await sync(p, two());
  const clean = fake.dump();
  await fake.run(
    new Transaction().delete({
      kind: "element",
      set: "frontends-dnat-tcp-2",
      key: ["198.19.0.10", "tcp", "80"],
    }),
  );
  p.noteForeign(touched({ elements: new Set(["frontends-dnat-tcp-2"]) }));
  fake.listed = [];
  fake.chainLists = 0;
  const r = await sync(p, two());
  assert.deepEqual(fake.listed, ["frontends-dnat-tcp-2"]);
  assert.equal(fake.chainLists, 0, "no chain was touched: chains are not listed");
  assert.deepEqual(r.drift?.examples, [
    "element 198.19.0.10 . tcp . 80 of frontends-dnat-tcp-2 is missing",
  ]);
  assert.equal(fake.dump(), clean);
  assert.equal(p.checkPending, false);
});

Deno.test("a flushed chain, a foreign rule and a foreign chain: chains are re-read and repaired", async () => {
  const { fake, p, clock } = setup();
  await sync(p, two());
  const clean = fake.dump();
  const cls = (await fake.listChains()).find((c) => /^dnat-tcp-2/.test(c))!;
  await fake.run(
    new Transaction()
      .flush({ kind: "chain", name: cls })
      .add({ kind: "rule", chain: "services", rule: "ip daddr 198.19.0.10 return" })
      .add({ kind: "chain", name: "intruder" }),
  );
  p.noteForeign(touched({ chains: new Set([cls, "services", "intruder"]) }));
  fake.listed = [];
  const r = await sync(p, two());
  assert.equal(r.drift?.count, 3, JSON.stringify(r.drift));
  assert.deepEqual(fake.listed, [], "no map was touched: none is listed");
  clock.t += 5000;
  await sync(p, two()); // the emptied intruder goes
  assert.equal(fake.dump(), clean);
});

Deno.test("a deleted set is declared again and refilled", async () => {
  const { fake, p } = setup();
  await sync(p, two());
  const clean = fake.dump();
  // cluster-ips is used by rules: the other program flushes those chains first.
  await fake.run(
    new Transaction()
      .flush({ kind: "chain", name: "cluster-ips-check" })
      .flush({ kind: "chain", name: "services" })
      .delete({ kind: "set", name: "cluster-ips", type: "ipv4_addr" }),
  );
  p.noteForeign(
    touched({ chains: new Set(["cluster-ips-check"]), sets: new Set(["cluster-ips"]) }),
  );
  const r = await sync(p, two());
  assert.ok((r.drift?.count ?? 0) >= 2, JSON.stringify(r.drift));
  assert.equal(fake.dump(), clean);
});

Deno.test("a changed bucket map moves to a fresh generation and counts as drift", async () => {
  const { fake, p } = setup();
  await sync(p, two());
  const bucket = (await fake.listSets()).find((s) => s.name.startsWith("endpoints-tcp"))!.name;
  p.noteForeign(touched({ elements: new Set([bucket]) }));
  const r = await sync(p, two());
  assert.equal(r.full, true);
  assert.equal(p.written.gen, 1);
  assert.ok(r.drift!.examples.includes(`elements of ${bucket} changed`), JSON.stringify(r.drift));
});

Deno.test("a foreign change before the first sync is covered by that sync", async () => {
  const { p } = setup();
  p.noteForeign(touched({ elements: new Set(["service-ips"]) }));
  const r = await sync(p, two());
  assert.equal(r.drift, undefined);
  assert.equal(p.checkPending, false);
});

Deno.test("dispatch elements only: restored without a plan of every service; foreign ones go", async () => {
  const { fake, p } = setup();
  await sync(p, two());
  const clean = fake.dump();
  await fake.run(
    new Transaction()
      .delete({ kind: "element", set: "frontends-dnat-tcp-2", key: ["198.19.0.10", "tcp", "80"] })
      .add({
        kind: "element",
        map: "service-ips",
        key: ["198.19.9.9", "tcp", "80"],
        value: ["drop"],
      }),
  );
  p.noteForeign(touched({ elements: new Set(["service-ips", "frontends-dnat-tcp-2"]) }));
  fake.chainLists = 0;
  const r = await sync(p, two());
  assert.equal(r.full, false, "no full plan for a few elements");
  assert.equal(fake.chainLists, 0);
  assert.equal(r.drift?.count, 2, JSON.stringify(r.drift));
  assert.equal(fake.dump(), clean);
});
