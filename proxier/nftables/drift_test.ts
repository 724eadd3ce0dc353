import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import { Transaction } from "../../ffi/nftables/types.ts";
import type { ProxyState } from "../model.ts";
import { noStale } from "../../tests/support/synthetic.ts";
import { chainDigest, digestRules } from "./plan/common.ts";
import { Proxier, type SyncResult } from "./proxier.ts";
import { CFG, ep, state, svc } from "./testing.ts";

function setup() {
  const clock = { t: 1000 };
  const fake = new MemoryNftables("ip", "kube-proxy");
  const p = new Proxier({
    client: fake,
    config: CFG,
    now: () => clock.t,
    trimMemory: false,
    staleChainDelayMs: 1000,
  });
  return { fake, p, clock };
}

async function sync(p: Proxier, s: ProxyState, changed: string[] = []): Promise<SyncResult> {
  const r = await p.sync({
    state: s,
    changed: new Set(changed),
    deleted: new Set(),
    stale: noStale(),
  });
  assert.ok(r !== null);
  return r;
}

const web = svc("default/web:p", { clusterIP: "198.19.0.10", nodePort: 30080 });
const sticky = svc("default/sticky:p", { clusterIP: "198.19.0.11", stickyMaxAgeSeconds: 10800 });
const two = () =>
  state([web, sticky], {
    [web.id]: [ep("198.18.129.2"), ep("198.18.129.3")],
    [sticky.id]: [ep("198.18.129.2"), ep("198.18.129.3")],
  });

Deno.test("digestRules counts the rules of a chain digest, base chains included", () => {
  const base = chainDigest({
    chain: {
      kind: "chain",
      name: "b",
      type: "filter",
      hook: "input",
      priority: 0,
      policy: "accept",
    },
    rules: ["ct state new jump x", "counter"],
  });
  assert.equal(digestRules(base), 2);
  assert.equal(
    digestRules(chainDigest({
      chain: { kind: "chain", name: "n", type: "nat", hook: "output", priority: -100 },
      rules: [],
    })),
    0,
  );
  assert.equal(digestRules(chainDigest({ chain: { kind: "chain", name: "c" }, rules: [] })), 0);
  assert.equal(digestRules(chainDigest({ chain: { kind: "chain", name: "c" }, rules: ["a"] })), 1);
});

Deno.test("a periodic check that only deletes stale chains finds no drift (not a repair)", async () => {
  const { p, clock } = setup();
  await sync(p, two(), [web.id, sticky.id]);
  // web drops to one endpoint: its 2-endpoint classes' sets go stale (the chains are reserved),
  // deleted a second later.
  const one = state([web, sticky], {
    [web.id]: [ep("198.18.129.3")],
    [sticky.id]: [ep("198.18.129.2"), ep("198.18.129.3")],
  });
  await sync(p, one, [web.id]);
  clock.t += 5000;
  p.requestFullSync("periodic check against the kernel");
  const r = await sync(p, one);
  assert.equal(r.full, true);
  assert.ok(
    r.ops > 0 && p.written.staleSets.size === 0,
    "the stale sets were deleted in this sync",
  );
  assert.deepEqual(r.drift, { count: 0, examples: [] });
});

Deno.test("drift names what another program changed, and the full sync repairs it", async () => {
  const { fake, p, clock } = setup();
  await sync(p, two(), [web.id, sticky.id]);
  const clean = fake.dump();
  const chains = await fake.listChains();
  const stickyChain = chains.find((c) => c.includes("default/sticky/"))!;
  // Another program: a rule in `services`, a foreign chain, a deleted ClusterIP, a deleted
  // dispatch element.
  await fake.run(
    new Transaction()
      .add({ kind: "rule", chain: "services", rule: "ip daddr 198.19.0.10 return" })
      .add({ kind: "chain", name: "intruder" })
      .delete({ kind: "element", set: "cluster-ips", key: ["198.19.0.10"] })
      .delete({ kind: "element", map: "service-ips", key: ["198.19.0.11", "tcp", "80"] }),
  );
  p.requestFullSync("periodic check against the kernel");
  const r = await sync(p, two());
  assert.equal(r.drift?.count, 4, JSON.stringify(r.drift));
  assert.deepEqual(r.drift?.examples.sort(), [
    "chain intruder is not ours",
    "chain services holds 5 rules, not 4",
    "element 198.19.0.10 of cluster-ips is missing",
    "element 198.19.0.11 . tcp . 80 of service-ips is missing",
  ]);
  assert.ok(stickyChain);
  // The foreign rule is gone at once; the foreign chain is emptied, and deleted a bit later.
  const services = await fake.listChain("services");
  assert.ok(!services!.rules.some((x) => x.rule.includes("return")), "foreign rule kept");
  assert.deepEqual((await fake.listChain("intruder"))?.rules, []);
  p.requestFullSync("periodic check against the kernel");
  const again = await sync(p, two());
  assert.deepEqual(again.drift, { count: 0, examples: [] }, "the repair did not converge");
  clock.t += 5000;
  await sync(p, two()); // deletes the emptied intruder
  assert.equal(fake.dump(), clean);
});

Deno.test("a deleted service chain is restored with its dispatch element", async () => {
  const { fake, p } = setup();
  await sync(p, two(), [web.id, sticky.id]);
  const before = fake.dump();
  const chain = (await fake.listChains()).find((c) => c.startsWith("service-"))!;
  await fake.run(
    new Transaction()
      .delete({ kind: "element", map: "service-ips", key: ["198.19.0.11", "tcp", "80"] })
      .flush({ kind: "chain", name: chain })
      .delete({ kind: "chain", name: chain }),
  );
  p.requestFullSync("periodic check against the kernel");
  const r = await sync(p, two());
  assert.ok((r.drift?.count ?? 0) >= 2, JSON.stringify(r.drift));
  assert.ok(r.drift!.examples.includes(`chain ${chain} is missing`), JSON.stringify(r.drift));
  assert.equal(fake.dump(), before);
});
