import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import { Transaction } from "../../ffi/nftables/types.ts";
import { buildContext } from "./context.ts";
import { LOCALHOST_CHAIN, localhostRejectedCounter } from "./localhost.ts";
import { Proxier } from "./proxier.ts";
import { buildSkeleton, classDispatchChains } from "./skeleton.ts";
import { CFG, state } from "./testing.ts";
import { noStale, syntheticConfig, syntheticState } from "../../tests/support/synthetic.ts";

Deno.test("localhost rules: only while the proxy serves the family; UDP and SCTP counted and rejected", () => {
  const classes = ["nodeport-dnat-udp-2", "nodeport-dnat-tcp-2", "dnat-udp-2"];
  const offCtx = buildContext(state(), CFG);
  assert.ok(!classDispatchChains(offCtx, classes).some((c) => c.chain.name === LOCALHOST_CHAIN));
  const onCtx = buildContext(state(), { ...CFG, localhostNodePorts: [4] });
  const on = buildSkeleton(onCtx, 0);
  const out = on.chains.find((c) => c.chain.name === "nat-output")!;
  assert.equal(out.rules[0], `ip daddr 127.0.0.1 jump ${LOCALHOST_CHAIN}`);
  const chk = classDispatchChains(onCtx, classes).find((c) => c.chain.name === LOCALHOST_CHAIN)!;
  assert.deepEqual(chk.counters, [
    localhostRejectedCounter("udp"),
    localhostRejectedCounter("sctp"),
  ]);
  assert.deepEqual(chk.rules, [
    'meta l4proto . udp dport @service-nodeports counter name "localhost-nodeport-rejected-udp" reject',
    'meta l4proto . udp dport @no-endpoint-nodeports counter name "localhost-nodeport-rejected-udp" reject',
    // NodePorts of a class chain are in its frontends set.
    'meta l4proto . udp dport @frontends-nodeport-dnat-udp-2 counter name "localhost-nodeport-rejected-udp" reject',
    'meta l4proto . sctp dport @service-nodeports counter name "localhost-nodeport-rejected-sctp" reject',
    'meta l4proto . sctp dport @no-endpoint-nodeports counter name "localhost-nodeport-rejected-sctp" reject',
  ]);
  // Another family served does not add this family's rules.
  const v6only = buildContext(state(), { ...CFG, localhostNodePorts: [6] });
  assert.ok(!classDispatchChains(v6only, classes).some((c) => c.chain.name === LOCALHOST_CHAIN));
});

Deno.test("localhost rules: a full sync writes the counters before the rules; turning off retires the chain", async () => {
  const fake = new MemoryNftables("ip", "kube-proxy");
  const st = syntheticState({ services: 2, endpointsPerService: 1, nodePortEvery: 1, udpEvery: 2 });
  const sync = (p: Proxier) =>
    p.sync({ state: st, changed: new Set(), deleted: new Set(), stale: noStale() });
  const on = new Proxier({
    client: fake,
    config: { ...syntheticConfig(), localhostNodePorts: [4] },
    trimMemory: false,
  });
  await sync(on);
  const dump = fake.dump();
  assert.match(dump, /counter localhost-nodeport-rejected-udp \{/);
  assert.match(dump, new RegExp(`chain ${LOCALHOST_CHAIN} \\{`));
  assert.equal(await fake.counterPackets(localhostRejectedCounter("udp")), 0);
  // A restart that adopts the table keeps the counters and their values.
  fake.countPackets(localhostRejectedCounter("udp"), 3);
  await sync(
    new Proxier({
      client: fake,
      config: { ...syntheticConfig(), localhostNodePorts: [4] },
      trimMemory: false,
    }),
  );
  assert.equal(await fake.counterPackets(localhostRejectedCounter("udp")), 3);
  // Off: nat-output no longer jumps, and the chain goes stale (emptied now).
  await sync(new Proxier({ client: fake, config: syntheticConfig(), trimMemory: false }));
  const after = fake.dump();
  assert.ok(!after.includes(`jump ${LOCALHOST_CHAIN}`), after);
  assert.ok(!after.includes('counter name "localhost-nodeport-rejected-udp"'));
});

Deno.test("memory nftables: named counters as the kernel has them", async () => {
  const fake = new MemoryNftables("ip", "t");
  await fake.run(new Transaction().add({ kind: "table" }).add({ kind: "chain", name: "c" }));
  await assert.rejects(
    fake.run(new Transaction().add({ kind: "rule", chain: "c", rule: 'counter name "x" drop' })),
    /counter x does not exist/,
  );
  await fake.run(
    new Transaction().add({ kind: "counter", name: "x" })
      .add({ kind: "rule", chain: "c", rule: 'counter name "x" drop' }),
  );
  await fake.run(new Transaction().add({ kind: "counter", name: "x" })); // add: no-op
  await assert.rejects(
    fake.run(new Transaction().create({ kind: "counter", name: "x" })),
    /exists/,
  );
  await assert.rejects(
    fake.run(new Transaction().delete({ kind: "counter", name: "x" })),
    /still used by 1 rule/,
  );
  fake.countPackets("x", 2);
  assert.equal(await fake.counterPackets("x"), 2);
  assert.equal(await fake.counterPackets("y"), undefined);
  await fake.run(
    new Transaction().flush({ kind: "chain", name: "c" }).delete({ kind: "counter", name: "x" }),
  );
  assert.equal(await fake.counterPackets("x"), undefined);
});
