/**
 * Runs the nftables contract suite (tests/contract/nftables_cases.ts) against
 * {@link FakeNftables}. The same cases run against the kernel in
 * tests/e2e/contract_test.ts, which keeps the fake honest.
 *
 * @module
 */
import { cases } from "../../tests/contract/nftables_cases.ts";
import { FakeNftables } from "./fake.ts";
import type { Family } from "./types.ts";

for (const c of cases) {
  Deno.test(`contract (fake): ${c.name}`, async () => {
    const clients = new Map<Family, FakeNftables>();
    await c.run((family = "ip") => {
      let f = clients.get(family);
      if (f === undefined) clients.set(family, f = new FakeNftables(family, "knp-contract"));
      return f;
    });
  });
}
