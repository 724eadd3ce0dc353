import assert from "node:assert/strict";
import { FakeConntrack } from "../ffi/conntrack/fake.ts";
import type { ConntrackClient } from "../ffi/conntrack/types.ts";
import type { ProxyState } from "../proxier/model.ts";
import { InlineConntrack } from "./runner.ts";

const STATE: ProxyState = {
  family: 4,
  services: new Map(),
  endpoints: new Map(),
  node: { name: "me", labels: {}, ips: [], podCIDRs: [] },
  // A service range makes the reconcile dump the table.
  serviceCIDRs: ["198.19.0.0/16"],
};

Deno.test("InlineConntrack: one client for both jobs, reopened after a failure, closed on close", async () => {
  const opened: FakeConntrack[] = [];
  const closed = new Set<FakeConntrack>();
  let fail = false;
  const runner = new InlineConntrack((): ConntrackClient => {
    const c = new FakeConntrack();
    const dump = c.dump.bind(c);
    c.dump = (...a) => {
      if (fail) throw new Error("dump failed");
      return dump(...a);
    };
    c.close = () => void closed.add(c);
    opened.push(c);
    return c;
  });
  const r = await runner.reconcile(4, STATE);
  assert.equal(r.deleted, 0);
  const empty = { servicesWithNewEndpoints: [], deletedEndpoints: [] };
  await runner.cleanup(4, empty);
  assert.equal(opened.length, 1, "one client for both");
  fail = true;
  await assert.rejects(runner.reconcile(4, STATE), /dump failed/);
  fail = false;
  await runner.reconcile(4, STATE);
  assert.equal(opened.length, 2, "a fresh client after the failure");
  assert.ok(closed.has(opened[0]), "the failed client was closed");
  runner.close();
  assert.ok(closed.has(opened[1]), "close() closes the current client");
});
