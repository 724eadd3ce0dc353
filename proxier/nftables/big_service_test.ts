import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { Transaction } from "../../ffi/nftables/types.ts";
import type { EndpointInfo, ProxyState } from "../model.ts";
import { Proxier } from "./proxier.ts";
import { CFG, ep, state, svc } from "./testing.ts";

const NO_STALE = { servicesWithNewEndpoints: [], deletedEndpoints: [] };

Deno.test("a rolling update of a 5000-endpoint Service writes only the buckets that changed", async () => {
  const big = svc("ns/big:http");
  const eps = Array.from({ length: 5000 }, (_, i) => ep(`198.18.${130 + (i >> 8)}.${i & 255}`));
  const st = state([big], { [big.id]: eps }) as ProxyState & {
    endpoints: Map<string, EndpointInfo[]>;
  };
  const fake = new MemoryNftables("ip", "kube-proxy");
  const sent: Transaction[] = [];
  const run = fake.run.bind(fake);
  fake.run = (tx) => (sent.push(tx), run(tx));
  const p = new Proxier({ client: fake, config: CFG, trimMemory: false });
  const sync = () =>
    p.sync({ state: st, changed: new Set([big.id]), deleted: new Set(), stale: NO_STALE });
  await sync();
  for (let step = 0; step < 5; step++) {
    // One pod of the middle replaced by a new one, and one removed for good: the list stays
    // sorted as the tracker hands it over, so without stable buckets every later bucket moves.
    const cur = st.endpoints.get(big.id)!;
    const next = cur.filter((_, i) => i !== 1000 + step && i !== 2000 + step);
    next.push(ep(`198.18.200.${step}`));
    next.sort((a, b) => (a.ip < b.ip ? -1 : 1));
    st.endpoints.set(big.id, next);
    sent.length = 0;
    await sync();
    const elements = sent.flatMap((tx) => tx.ops).filter((op) => op.obj.kind === "element");
    const buckets = elements.filter((op) =>
      "map" in op.obj && op.obj.map === "endpoints-large-tcp"
    );
    // Two pods gone, one new: the new one takes a freed bucket, the last bucket's endpoint
    // moves into the other (2 deletes + 2 adds), the last bucket goes (1 delete). Besides them
    // only the verdict (its endpoint count changed) and the hairpin set's three elements.
    assert.equal(buckets.length, 5, `step ${step}: ${JSON.stringify(buckets)}`);
    assert.ok(elements.length <= 10, `step ${step}: ${elements.length} element operations`);
  }
  const dump = fake.dump();
  for (const e of st.endpoints.get(big.id)!) assert.ok(dump.includes(`: ${e.ip} . 8080`), e.ip);
});

Deno.test("a frontend crossing the large maps' threshold moves its buckets between the maps", async () => {
  const s1 = svc("ns/grow:http");
  const mk = (n: number) => Array.from({ length: n }, (_, i) => ep(`198.18.140.${i + 1}`));
  const st = state([s1], { [s1.id]: mk(16) }) as ProxyState & {
    endpoints: Map<string, EndpointInfo[]>;
  };
  const fake = new MemoryNftables("ip", "kube-proxy");
  const p = new Proxier({ client: fake, config: CFG, trimMemory: false });
  const sync = () =>
    p.sync({ state: st, changed: new Set([s1.id]), deleted: new Set(), stale: NO_STALE });
  // Elements of one map in the dump: the lines of its `elements = { ... }` block.
  const elementsOf = (map: string) => {
    const d = fake.dump();
    const start = d.indexOf(`map ${map} {`);
    if (start < 0) return -1;
    const block = d.slice(start, d.indexOf("\n\t}", start));
    const els = block.indexOf("elements = {");
    return els < 0 ? 0 : block.slice(els).split("\n").filter((l) => l.includes(" : ")).length;
  };
  await sync();
  assert.equal(elementsOf("endpoints-tcp"), 16);
  assert.equal(elementsOf("endpoints-large-tcp"), 0);
  st.endpoints.set(s1.id, mk(17));
  await sync();
  assert.equal(elementsOf("endpoints-tcp"), 0, "all 16 left the small map");
  assert.equal(elementsOf("endpoints-large-tcp"), 17);
  assert.ok(fake.dump().includes("numgen random mod 17 map @endpoints-large-tcp"));
  st.endpoints.set(s1.id, mk(16));
  await sync();
  assert.equal(elementsOf("endpoints-tcp"), 16, "and back");
  assert.equal(elementsOf("endpoints-large-tcp"), 0);
  assert.equal(elementsOf("endpoints-large-tcp"), 0, "the large map stays declared");
});
