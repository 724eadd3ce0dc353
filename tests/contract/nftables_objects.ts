/**
 * Contract cases for the table's objects and their references (see nftables_cases.ts): tables,
 * base and regular chains, rules with handles and positions, jump/goto and @set references,
 * loops, and what a delete of a referenced object does.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  chain,
  type ContractCase,
  el,
  fails,
  mustList,
  natPre,
  rule,
  rulesOf,
  table,
  tx,
} from "./nftables_helpers.ts";

/** Cases of tables, chains, rules and references. */
export const objectCases: ContractCase[] = [
  {
    name: "table lifecycle: add, create-existing fails, delete, delete-missing fails",
    async run(c) {
      const n = c();
      assert.equal(await n.list(), null);
      assert.deepEqual(await n.listChains(), []);
      await n.run(tx().add({ kind: "table", comment: "rules for tests" }));
      const st = await mustList(n);
      assert.equal(st.comment, "rules for tests");
      assert.equal(st.chains.size + st.sets.size + st.maps.size, 0);
      await n.run(tx().add(table));
      await fails(n, tx().add(chain("x")).create(table), 1, "exists");
      await n.run(tx().delete(table));
      assert.equal(await n.list(), null);
      await fails(n, tx().delete(table), 0, "notFound");
      await fails(n, tx().flush(table), 0, "notFound");
    },
  },
  {
    name: "ops on a missing table fail",
    async run(c) {
      const n = c();
      await fails(n, tx().add(chain("a")), 0, "notFound");
      await fails(n, tx().add({ kind: "set", name: "s", type: "ipv4_addr" }), 0, "notFound");
      await fails(n, tx().add(table).delete(table).add(chain("a")), 2, "notFound");
      assert.equal(await n.list(), null);
    },
  },
  {
    name: "base chains: hook, priority, policy; redefinition rules",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table)
          .add(chain("nat-prerouting", { ...natPre, policy: "accept", comment: "pre" }))
          .add(chain("filter-in", { type: "filter", hook: "input", priority: 0 }))
          .add(chain("plain")),
      );
      let st = await mustList(n);
      const pre = st.chains.get("nat-prerouting")!.chain;
      assert.deepEqual(
        [pre.type, pre.hook, pre.priority, pre.policy ?? "accept"],
        ["nat", "prerouting", -100, "accept"],
      );
      assert.equal(st.chains.get("filter-in")!.chain.hook, "input");
      assert.equal(st.chains.get("plain")!.chain.hook, undefined);
      assert.deepEqual((await n.listChains()).sort(), ["filter-in", "nat-prerouting", "plain"]);
      // Re-adding the same base chain, or the bare name, is fine; the policy may change.
      await n.run(tx().add(chain("nat-prerouting", natPre)).add(chain("nat-prerouting")));
      await n.run(tx().add(chain("filter-in", { type: "filter", hook: "input", policy: "drop" })));
      st = await mustList(n);
      assert.equal(st.chains.get("filter-in")!.chain.policy, "drop");
      const other = { ...natPre, priority: -90 };
      await fails(n, tx().add(chain("nat-prerouting", other)), 0, "notSupported");
      await fails(n, tx().add(chain("nat-prerouting", { ...natPre, hook: "input" })), 0, "any");
      await fails(n, tx().add(chain("nat-prerouting", { ...natPre, type: "filter" })), 0, "exists");
      await fails(n, tx().add(chain("plain", natPre)), 0, "exists");
      await fails(n, tx().add(chain("new")).create(chain("plain")), 1, "exists");
    },
  },
  {
    name: "rules: handles, comments, insert/add with position, replace, delete",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a")).add(chain("b"))
          .add(rule("a", "jump b", { comment: "to b" }))
          .add(rule("b", "ip daddr 198.18.0.1 drop"))
          .add(rule("a", "ip daddr 198.18.0.2 drop")),
      );
      let st = await mustList(n);
      // One per-table handle counter: chains 1, 2; rules 3, 4, 5.
      assert.deepEqual(rulesOf(st, "a").map((r) => [r.handle, r.comment, r.rule]), [
        [3, "to b", "jump b"],
        [5, undefined, "ip daddr 198.18.0.2 drop"],
      ]);
      assert.deepEqual(rulesOf(st, "b").map((r) => r.handle), [4]);
      await n.run(
        tx().insert(rule("a", "ip daddr 198.18.0.3 drop"))
          .add({ ...rule("a", "ip daddr 198.18.0.4 drop"), position: 3 })
          .insert({ ...rule("a", "ip daddr 198.18.0.5 drop"), position: 5 }),
      );
      st = await mustList(n);
      assert.deepEqual(rulesOf(st, "a").map((r) => r.handle), [6, 3, 7, 8, 5]);
      await n.run(tx().replace(rule("a", "ip daddr 198.18.0.9 drop", { handle: 7, comment: "r" })));
      st = await mustList(n);
      const replaced = rulesOf(st, "a")[2];
      assert.deepEqual([replaced.handle, replaced.comment, replaced.rule], [
        7,
        "r",
        "ip daddr 198.18.0.9 drop",
      ]);
      await n.run(tx().delete(rule("a", "", { handle: 8 })));
      st = await mustList(n);
      assert.deepEqual(rulesOf(st, "a").map((r) => r.handle), [6, 3, 7, 5]);
      await fails(n, tx().delete(rule("a", "", { handle: 99 })), 0, "notFound");
      await fails(n, tx().replace(rule("a", "ip daddr 198.18.0.1 drop", { handle: 4 })), 0, "any");
      await fails(
        n,
        tx().add(rule("b", "ip daddr 198.18.0.7 drop")).add({
          ...rule("a", "ip daddr 198.18.0.8 drop"),
          position: 99,
        }),
        1,
        "notFound",
      );
      await fails(n, tx().add(rule("nochain", "ip daddr 198.18.0.1 drop")), 0, "notFound");
    },
  },
  {
    name: "anonymous sets in rules take handles; one-element sets do not",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a")).add(chain("b"))
          .add(rule("a", "ip daddr { 198.18.0.1, 198.18.0.2 } drop"))
          .add(rule("a", "ip daddr { 198.18.0.3 } drop"))
          .add(rule("a", "numgen random mod 2 vmap { 0 : goto b, 1 : jump b }"))
          .add(rule("a", "ip daddr 198.18.0.4 drop")),
      );
      const st = await mustList(n);
      assert.deepEqual(rulesOf(st, "a").map((r) => r.handle), [4, 5, 7, 8]);
      // b is held by the inline vmap.
      await fails(n, tx().delete(chain("b")), 0, "busy");
    },
  },
  {
    name: "jump/goto targets must exist and must not be base chains",
    async run(c) {
      const n = c();
      await n.run(tx().add(table).add(chain("a")).add(chain("pre", natPre)));
      await fails(n, tx().add(rule("a", "jump nope")), 0, "notFound");
      await fails(n, tx().add(chain("x")).add(rule("a", "goto nope")), 1, "notFound");
      await fails(
        n,
        tx().add(rule("a", "numgen random mod 2 vmap { 0 : goto a, 1 : goto nope }")),
        0,
        "notFound",
      );
      await fails(n, tx().add(rule("a", "jump pre")), 0, "notSupported");
      // Created earlier in the same transaction: fine.
      await n.run(tx().add(chain("new")).add(rule("a", "goto new")).add(rule("pre", "jump a")));
      const st = await mustList(n);
      assert.deepEqual(rulesOf(st, "a").map((r) => r.rule), ["goto new"]);
      // Deleted earlier in the same transaction: gone.
      await fails(
        n,
        tx().add(chain("tmp")).delete(chain("tmp")).add(rule("a", "jump tmp")),
        2,
        "notFound",
      );
    },
  },
  {
    name: "loops and deep jump paths below a base chain are refused (EMLINK)",
    async run(c) {
      const n = c();
      const setup = tx().add(table).add(chain("pre", natPre)).add(chain("a")).add(chain("b"))
        .add(rule("a", "jump b"));
      for (let i = 1; i <= 17; i++) setup.add(chain(`c${i}`));
      for (let i = 1; i <= 16; i++) setup.add(rule(`c${i}`, `jump c${i + 1}`));
      // A loop nothing reaches from a base chain is not checked.
      setup.add(rule("b", "jump a"));
      await n.run(setup);
      await fails(
        n,
        tx().add(rule("pre", "ip daddr 198.18.0.1 drop")).add(rule("pre", "jump a")),
        1,
        "any",
      );
      const m = { kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" } as const;
      await n.run(tx().add(m).add(rule("pre", "ip daddr vmap @m")));
      await fails(n, tx().add(el("m", ["198.18.0.1"], ["goto a"])), 0, "any");
      // pre -> c3 ... c17 is 15 jumps deep: allowed; from c2 it is 16: refused.
      await n.run(tx().add(rule("pre", "jump c3")));
      await fails(n, tx().add(rule("pre", "goto c2")), 0, "any");
      await fails(n, tx().add(el("m", ["198.18.0.3"], ["jump c2"])), 0, "any");
      await fails(n, tx().add(rule("c17", "jump c5")), 0, "any");
    },
  },
  {
    name: "failedOperation points into a run of element adds when the kernel blames the command",
    async run(c) {
      const n = c();
      // EMLINK is reported against the whole `add element` command, not one element.
      await n.run(
        tx().add(table).add(chain("pre", natPre)).add(chain("a")).add(chain("b"))
          .add(rule("a", "jump b")).add(rule("b", "jump a"))
          .add({ kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" })
          .add(rule("pre", "ip daddr vmap @m")),
      );
      await fails(
        n,
        tx().add(el("m", ["198.18.0.1"], ["drop"]))
          .add(el("m", ["198.18.0.2"], ["goto b"]))
          .add(el("m", ["198.18.0.3"], ["accept"])),
        1,
        "any",
      );
    },
  },
  {
    name: "@set references must exist",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a"))
          .add({ kind: "set", name: "s", type: "ipv4_addr" })
          .add(rule("a", "ip daddr @s accept")),
      );
      await fails(n, tx().add(rule("a", "ip daddr @nope accept")), 0, "notFound");
      const st = await mustList(n);
      assert.deepEqual(rulesOf(st, "a").map((r) => r.rule), ["ip daddr @s accept"]);
    },
  },
  {
    name: "deleting referenced chains fails; unreferenced non-empty chains go with their rules",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a")).add(chain("b")).add(chain("c")).add(chain("d"))
          .add(rule("a", "jump b"))
          .add(rule("b", "ip daddr 198.18.0.1 drop"))
          .add(rule("c", "ip daddr 198.18.0.2 drop"))
          .add({ kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" })
          .add(el("m", ["198.18.0.1"], ["goto d"])),
      );
      await fails(n, tx().delete(chain("b")), 0, "busy");
      await fails(n, tx().delete(chain("d")), 0, "busy");
      // A chain's own rules do not hold it: the kernel deletes them too.
      await n.run(tx().delete(chain("c")));
      // Dropping the reference first in the same transaction works.
      await n.run(tx().delete(rule("a", "", { handle: 5 })).delete(chain("b")));
      await n.run(tx().delete(el("m", ["198.18.0.1"])).delete(chain("d")));
      assert.deepEqual((await n.listChains()).sort(), ["a"]);
      await fails(n, tx().delete(chain("nope")), 0, "notFound");
      // A chain that jumps to itself holds itself.
      await n.run(tx().add(chain("self")).add(rule("self", "jump self")));
      await fails(n, tx().delete(chain("self")), 0, "busy");
      await n.run(tx().flush(chain("self")).delete(chain("self")));
    },
  },
  {
    name: "deleting a set or map still used by a rule fails",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a"))
          .add({ kind: "set", name: "s", type: "ipv4_addr" })
          .add({ kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" })
          .add(rule("a", "ip daddr @s accept"))
          .add(rule("a", "ip daddr vmap @m")),
      );
      await fails(n, tx().delete({ kind: "set", name: "s", type: "ipv4_addr" }), 0, "busy");
      await fails(
        n,
        tx().delete({ kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" }),
        0,
        "busy",
      );
      await n.run(
        tx().delete(rule("a", "", { handle: 4 })).delete({
          kind: "set",
          name: "s",
          type: "ipv4_addr",
        }),
      );
      const st = await mustList(n);
      assert.deepEqual([...st.sets.keys()], []);
      await fails(n, tx().delete({ kind: "set", name: "s", type: "ipv4_addr" }), 0, "notFound");
    },
  },
];
