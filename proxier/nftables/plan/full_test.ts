import assert from "node:assert/strict";
import type { Transaction } from "../../../ffi/nftables/types.ts";
import { contextKey } from "../context.ts";
import { buildServiceRules, type ServiceRules } from "../service_rules.ts";
import { ctx4, ep, svc } from "../testing.ts";
import { type Delta, WrittenState } from "../written_state.ts";
import type { Plan } from "./common.ts";
import { planFull } from "./full.ts";
import type { KernelView } from "./kernel_view.ts";

const COLD: KernelView = { tableExists: false, chains: [], sets: [], elements: new Map() };

/** A cold full plan of `n` ports, cut into small transactions. */
function coldPlan(n: number): Plan {
  const ctx = ctx4();
  const services = new Map<string, ServiceRules>();
  for (let i = 0; i < n; i++) {
    const s = svc(`ns/s${i}:http`, { clusterIP: `198.19.0.${i + 1}` });
    services.set(s.id, buildServiceRules(s, [ep(`198.18.130.${i + 1}`)], ctx));
  }
  const written = new WrittenState();
  return planFull(written, {
    ctx,
    contextKey: contextKey(ctx),
    services,
    view: COLD,
    now: 0,
    maxOps: 2,
  });
}

Deno.test("plan: the delta is the generator's return value, complete only once drained", () => {
  const plan = coldPlan(5);
  const txs: Transaction[] = [];
  let step = plan.next();
  for (; !step.done; step = plan.next()) txs.push(step.value);
  assert.ok(txs.length > 2, `several transactions, got ${txs.length}`);
  const delta: Delta = step.value;
  // Written by the last step (setMeta after every service): an early delta would lack it.
  assert.equal(delta.gen, 0);
  assert.equal(delta.contextKey, contextKey(ctx4()));
  assert.equal(delta.services.size, 5);
  const w = new WrittenState();
  w.commit(delta);
  assert.equal(w.gen, 0);
});

Deno.test("plan: a caller that stops early has no delta, and committing fails loudly", () => {
  const plan = coldPlan(5);
  assert.equal(plan.next().done, false);
  const early = plan.return(undefined as unknown as Delta);
  assert.equal(early.done, true);
  const w = new WrittenState();
  assert.throws(() => w.commit(early.value), /no delta/);
  assert.ok(w.empty, "nothing committed");
  assert.equal(plan.next().value, undefined, "a stopped plan stays stopped");
});
