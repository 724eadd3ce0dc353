import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import { Transaction } from "../../ffi/nftables/types.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../model.ts";
import { Proxier } from "./proxier.ts";
import { CFG, ep, state, svc } from "./testing.ts";
import { planStaleDeletion, staleRetryDelta, staleSteps, type StaleTry } from "./stale.ts";
import { WrittenState } from "./written_state.ts";

const NO_STALE = { servicesWithNewEndpoints: [], deletedEndpoints: [] };

Deno.test("stale: after a failed batch, each object is tried alone; gone is forgotten, in use retried", () => {
  const w = new WrittenState();
  w.chains.set("a", "");
  w.chains.set("b", "");
  w.staleChains.set("a", 0);
  w.staleChains.set("b", 0);
  w.staleSets.set("s", 0);
  const p = planStaleDeletion(w, 5000, 1000)!;
  const steps = staleSteps(p);
  assert.deepEqual(steps.map((s) => `${s.kind} ${s.name}`), ["chain a", "chain b", "set s"]);
  assert.ok(steps.every((s) => s.tx.size === 1), "one object per transaction");
  const tried: StaleTry[] = steps.map((s) => ({ ...s, inUse: s.name === "b" || s.name === "s" }));
  w.commit(staleRetryDelta(tried, 65_000));
  assert.deepEqual([...w.chains.keys()], ["b"], "a is deleted, b is still there");
  assert.deepEqual([...w.staleChains], [["b", 65_000]]);
  assert.deepEqual([...w.staleSets], [["s", 65_000]]);
});

Deno.test("proxier: a stale chain another program still uses is retried a minute later", async () => {
  let t = 1000;
  const fake = new MemoryNftables("ip", "kube-proxy");
  const warnings: string[] = [];
  const log = (level: string, msg: string) => void (level === "warn" && warnings.push(msg));
  const p = new Proxier({ client: fake, config: CFG, now: () => t, trimMemory: false, log });
  const st = state() as ProxyState & { services: Map<string, ServicePortInfo> };
  const s = svc("ns/a:http", { nodePort: 30001, externalPolicyLocal: true });
  st.services.set(s.id, s);
  (st.endpoints as Map<string, EndpointInfo[]>).set(s.id, [ep("198.18.129.1", { isLocal: true })]);
  const sync = (deleted: string[] = []) =>
    p.sync({ state: st, changed: new Set(), deleted: new Set(deleted), stale: NO_STALE });
  await sync();
  st.services.delete(s.id);
  await sync([s.id]);
  const stale = [...p.written.staleChains.keys()];
  assert.ok(stale.length > 1, `own chains went stale: ${stale}`);
  await fake.run(
    new Transaction().add({ kind: "chain", name: "intruder" })
      .add({ kind: "rule", chain: "intruder", rule: `goto ${stale[0]}` }),
  );
  t += 5000;
  await sync();
  assert.deepEqual([...p.written.staleChains], [[stale[0], t + 60_000]], "the rest went");
  assert.deepEqual(await fake.listChains().then((c) => stale.filter((n) => c.includes(n))), [
    stale[0],
  ]);
  assert.equal(warnings.length, 1);
  await fake.run(new Transaction().delete({ kind: "chain", name: "intruder" }));
  t += 30_000;
  await sync();
  assert.ok(p.written.staleChains.has(stale[0]), "not before the retry time");
  t += 31_000; // the retry time, plus the stale delay
  await sync();
  assert.equal(p.written.staleChains.size, 0);
  assert.ok(!(await fake.listChains()).includes(stale[0]));
});
