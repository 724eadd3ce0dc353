/**
 * Contract cases for named counter objects (the localhost NodePort reject rules count into
 * them): a rule naming a missing counter fails, a counter a rule uses cannot be deleted, `create`
 * of one that exists fails, and a new counter reads 0 packets. Measured with `nft -f` in a test
 * namespace before they were written down.
 *
 * @module
 */
import assert from "node:assert/strict";
import { chain, type ContractCase, fails, rule, table, tx } from "./nftables_helpers.ts";

const counter = (name: string) => ({ kind: "counter", name }) as const;

/** The named-counter cases. */
export const counterCases: ContractCase[] = [
  {
    name: "named counter: a rule needs it, deleting it while used fails, create fails if it exists",
    async run(c) {
      const n = c();
      await n.run(tx().add(table).add(chain("a")));
      await fails(n, tx().add(rule("a", 'counter name "x" drop')), 0, "notFound");
      await n.run(tx().add(counter("x")).add(rule("a", 'counter name "x" drop')));
      await n.run(tx().add(counter("x"))); // add of an existing counter is a no-op
      await fails(n, tx().create(counter("x")), 0, "exists");
      await fails(n, tx().delete(counter("x")), 0, "busy");
      if (n.counterPackets) {
        assert.equal(await n.counterPackets("x"), 0);
        assert.equal(await n.counterPackets("y"), undefined);
      }
      await n.run(tx().flush(chain("a")).delete(counter("x")));
      if (n.counterPackets) assert.equal(await n.counterPackets("x"), undefined);
    },
  },
];
