/**
 * Runs the nftables contract suite (tests/contract/nftables_cases.ts) against
 * {@link MemoryNftables}. The same cases run against the kernel in
 * tests/e2e/contract_test.ts, which keeps the in-memory nftables honest.
 *
 * @module
 */
import { cases } from "../../../tests/contract/nftables_cases.ts";
import { MemoryNftables } from "./client.ts";
import type { Family } from "../types.ts";

for (const c of cases) {
  Deno.test(`contract (memory): ${c.name}`, async () => {
    const clients = new Map<Family, MemoryNftables>();
    await c.run((family = "ip") => {
      let f = clients.get(family);
      if (f === undefined) clients.set(family, f = new MemoryNftables(family, "knp-contract"));
      return f;
    });
  });
}
