import assert from "node:assert/strict";
import { DryRunNftables } from "./dry_run.ts";
import { Transaction } from "./types.ts";

Deno.test("dry run prints the script and touches nothing", async () => {
  const out: string[] = [];
  const c = new DryRunNftables("ip", "kube-proxy", (t) => out.push(t));
  await c.run(new Transaction());
  assert.equal(out.length, 0, "an empty transaction prints nothing");
  const tx = new Transaction()
    .add({ kind: "table", comment: "rules for kube-proxy" })
    .add({ kind: "chain", name: "services" })
    .add({ kind: "rule", chain: "services", rule: "ip daddr 198.18.0.1 drop" });
  await c.run(tx);
  assert.equal(out.length, 1);
  assert.match(out[0], /^# dry run: 3 operations on ip kube-proxy/);
  assert.match(out[0], /add table ip kube-proxy \{ comment "rules for kube-proxy" ; \}/);
  assert.match(out[0], /add rule ip kube-proxy services ip daddr 198\.18\.0\.1 drop/);
  assert.equal(await c.list(), null);
  assert.deepEqual(await c.listChains(), []);
});
