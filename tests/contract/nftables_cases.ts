/**
 * The nftables contract suite: cases that any {@link NftablesClient} must pass,
 * run against the in-memory nftables (ffi/nftables/memory/contract_test.ts) and
 * against the real kernel inside a test namespace
 * (tests/contract/real_contract_test.ts), so the fake cannot drift from the
 * kernel. Every case starts from a table that does not exist yet.
 *
 * Only what both sides agree on is compared: rule handles, comments, counts,
 * set/map definitions and canonical element text; rule text only for bodies
 * that the kernel lists back unchanged (`jump X`, `ip daddr A drop`, ...).
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Element, NftablesError, type Set as NftSet } from "../../ffi/nftables/types.ts";
import {
  chain,
  type ContractCase,
  el,
  fails,
  flags,
  keys,
  mustList,
  natPre,
  norm,
  rule,
  rulesOf,
  table,
  tx,
} from "./nftables_helpers.ts";
import { rejectionCases } from "./nftables_rejections.ts";

export { type ClientFactory, type ContractCase, summarize } from "./nftables_helpers.ts";

/** Every contract case. */
export const cases: ContractCase[] = [
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
  {
    name: "set elements: add, add-existing, create-existing, delete, delete-missing",
    async run(c) {
      const n = c();
      const s = { kind: "set", name: "ips", type: "ipv4_addr", comment: "addrs" } as const;
      await n.run(
        tx().add(table).add(s)
          .add(el("ips", ["198.18.0.1"], undefined, "one"))
          .add(el("ips", ["198.18.0.2"])),
      );
      let st = await mustList(n);
      assert.equal(st.sets.get("ips")!.set.comment, "addrs");
      assert.deepEqual(
        (await n.listElements("set", "ips")).map((e) => [e.key, e.comment]).sort(),
        [[["198.18.0.1"], "one"], [["198.18.0.2"], undefined]],
      );
      // add of an existing element is a no-op (the first comment stays).
      await n.run(tx().add(el("ips", ["198.18.0.1"], undefined, "other")));
      st = await mustList(n);
      assert.deepEqual(
        st.sets.get("ips")!.elements.find((e) => e.key[0] === "198.18.0.1")?.comment,
        "one",
      );
      await fails(
        n,
        tx().add(el("ips", ["198.18.0.3"])).create(el("ips", ["198.18.0.1"])),
        1,
        "exists",
      );
      await fails(n, tx().delete(el("ips", ["198.18.0.9"])), 0, "notFound");
      await n.run(tx().delete(el("ips", ["198.18.0.2"])));
      assert.deepEqual(keys(await n.listElements("set", "ips")), ["198.18.0.1"]);
      await fails(n, tx().add(el("nope", ["198.18.0.1"])), 0, "notFound");
    },
  },
  {
    name: "verdict map with concatenated key: values, protocol names, conflicting adds",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("svc-a")).add(chain("svc-b"))
          .add({
            kind: "map",
            name: "service-ips",
            type: "ipv4_addr . inet_proto . inet_service",
            dataType: "verdict",
            comment: "ClusterIP, ExternalIP and LoadBalancer IP traffic",
          })
          .add(el("service-ips", ["198.18.0.1", "tcp", "80"], ["goto svc-a"], "ns/a:http"))
          .add(el("service-ips", ["198.18.0.2", "17", "53"], ["jump svc-b"]))
          .add(el("service-ips", ["198.18.0.3", "sctp", "9"], ["drop"]))
          .add(el("service-ips", ["198.18.0.4", "6", "443"], ["accept"])),
      );
      const st = await mustList(n);
      const m = st.maps.get("service-ips")!;
      assert.equal(norm(m.map.type), "ipv4_addr . inet_proto . inet_service");
      assert.equal(m.map.dataType, "verdict");
      assert.deepEqual(keys(m.elements), [
        "198.18.0.1 . tcp . 80 : goto svc-a",
        "198.18.0.2 . udp . 53 : jump svc-b",
        "198.18.0.3 . sctp . 9 : drop",
        "198.18.0.4 . tcp . 443 : accept",
      ]);
      assert.equal(m.elements.find((e) => e.key[0] === "198.18.0.1")?.comment, "ns/a:http");
      // Same key and value: fine. Same key, other value: EEXIST.
      await n.run(tx().add(el("service-ips", ["198.18.0.1", "tcp", "80"], ["goto svc-a"])));
      await fails(
        n,
        tx().add(el("service-ips", ["198.18.0.1", "tcp", "80"], ["goto svc-b"])),
        0,
        "exists",
      );
      await fails(
        n,
        tx().add(el("service-ips", ["198.18.0.9", "tcp", "80"], ["goto nope"])),
        0,
        "notFound",
      );
      await fails(n, tx().delete(chain("svc-a")), 0, "busy");
    },
  },
  {
    name: "data map: ipv4_addr : ipv4_addr . inet_service",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table)
          .add({
            kind: "map",
            name: "dnat-targets",
            type: "ipv4_addr",
            dataType: "ipv4_addr . inet_service",
          })
          .add(el("dnat-targets", ["198.18.1.1"], ["198.18.2.1", "8080"]))
          .add(el("dnat-targets", ["198.18.1.2"], ["198.18.2.2", "53"], "dns")),
      );
      assert.deepEqual(keys(await n.listElements("map", "dnat-targets")), [
        "198.18.1.1 : 198.18.2.1 . 8080",
        "198.18.1.2 : 198.18.2.2 . 53",
      ]);
      await fails(n, tx().add(el("dnat-targets", ["198.18.1.3"], ["goto x"])), 0, "any");
      // nft keywords cannot be unquoted names.
      await fails(
        n,
        tx().add({ kind: "map", name: "dnat", type: "ipv4_addr", dataType: "ipv4_addr" }),
        0,
        "any",
      );
      await fails(n, tx().add(chain("ok")).add(chain("counter")), 1, "any");
      await fails(
        n,
        tx().add(el("dnat-targets", ["198.18.1.3"], ["198.18.2.3", "70000"])),
        0,
        "any",
      );
    },
  },
  {
    name: "interval sets: prefixes, ranges, normalisation, overlap, delete",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table)
          .add({ kind: "set", name: "cidrs", type: "ipv4_addr", flags: ["interval"] })
          .add({ kind: "set", name: "ports", type: "inet_service", flags: ["interval"] })
          .add(el("cidrs", ["198.18.0.0/16"]))
          .add(el("cidrs", ["198.19.0.1-198.19.0.5"]))
          .add(el("cidrs", ["198.19.1.1"]))
          .add(el("cidrs", ["198.19.2.7/24"]))
          .add(el("ports", ["80-90"]))
          .add(el("ports", ["100"])),
      );
      const st = await mustList(n);
      assert.deepEqual(st.sets.get("cidrs")!.set.flags, ["interval"]);
      assert.deepEqual(keys(await n.listElements("set", "cidrs")), [
        "198.18.0.0/16",
        "198.19.0.1-198.19.0.5",
        "198.19.1.1",
        "198.19.2.0/24",
      ]);
      assert.deepEqual(keys(await n.listElements("set", "ports")), ["100", "80-90"]);
      await n.run(tx().add(el("cidrs", ["198.18.0.0/16"])));
      await fails(n, tx().add(el("cidrs", ["198.18.1.0/24"])), 0, "any");
      await fails(n, tx().add(el("ports", ["85"])), 0, "any");
      await fails(n, tx().delete(el("cidrs", ["198.19.3.0/24"])), 0, "notFound");
      await n.run(tx().delete(el("cidrs", ["198.19.0.1-198.19.0.5"])));
      assert.equal((await n.listElements("set", "cidrs")).length, 3);
    },
  },
  {
    name: "concatenated interval keys",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table)
          .add({
            kind: "set",
            name: "fw",
            type: "ipv4_addr . inet_service",
            flags: ["interval"],
          })
          .add(el("fw", ["198.18.0.0/24", "80-90"]))
          .add(el("fw", ["198.18.1.5", "22"])),
      );
      assert.deepEqual(keys(await n.listElements("set", "fw")), [
        "198.18.0.0/24 . 80-90",
        "198.18.1.5 . 22",
      ]);
      await fails(n, tx().add(el("fw", ["198.18.0.0/25", "85"])), 0, "exists");
    },
  },
  {
    name: "elements that do not fit the type are rejected",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a"))
          .add({ kind: "set", name: "s", type: "ipv4_addr" })
          .add({
            kind: "map",
            name: "m",
            type: "ipv4_addr . inet_proto . inet_service",
            dataType: "verdict",
          }),
      );
      const bad: Element[] = [
        el("m", ["198.18.0.1", "tcp", "70000"], ["goto a"]),
        el("m", ["198.18.0.1", "foo", "80"], ["goto a"]),
        el("m", ["2001:db8::1", "tcp", "80"], ["goto a"]),
        el("m", ["198.18.0.1", "tcp"], ["goto a"]),
        el("m", ["198.18.0.1", "tcp", "80"], ["198.18.0.2"]),
        el("m", ["198.18.0.0/24", "tcp", "80"], ["drop"]),
        el("s", ["198.18.0.0/24"]),
        el("s", ["198.18.0.256"]),
      ];
      for (const e of bad) {
        await fails(n, tx().add(el("s", ["198.18.0.9"])).add(e), 1, "any");
      }
      const st = await mustList(n);
      assert.equal(st.sets.get("s")!.elements.length, 0);
    },
  },
  {
    name: "mark keys and a rule comment written inside the body",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a"))
          .add({ kind: "set", name: "marks", type: "mark" })
          .add(el("marks", ["0x10"]))
          .add(el("marks", ["17"]))
          .add(rule("a", 'ip daddr 198.18.0.1 drop comment "inline"')),
      );
      assert.deepEqual(keys(await n.listElements("set", "marks")), ["0x00000010", "0x00000011"]);
      const st = await mustList(n);
      assert.deepEqual(rulesOf(st, "a").map((r) => [r.rule, r.comment]), [
        ["ip daddr 198.18.0.1 drop", "inline"],
      ]);
    },
  },
  {
    name: "set flags and default timeouts read back as the kernel lists them",
    async run(c) {
      const n = c();
      const s = (name: string, extra: Partial<NftSet>): NftSet => ({
        kind: "set",
        name,
        type: "ipv4_addr",
        ...extra,
      });
      await n.run(
        tx().add(table)
          .add(s("a", { flags: ["timeout"], timeout: 60 }))
          .add(s("b", { timeout: 60 }))
          .add(s("c", { flags: ["timeout"] }))
          .add(s("d", { flags: ["constant"] }))
          .add(s("e", { flags: ["interval"], timeout: 90 }))
          .add(s("f", { flags: ["dynamic"] })),
      );
      const st = await mustList(n);
      assert.deepEqual(
        [...st.sets.values()].map(({ set }) => [set.name, flags(set.flags), set.timeout ?? null])
          .sort(),
        [
          ["a", "", 60],
          ["b", "", 60],
          ["c", "timeout", null],
          ["d", "constant", null],
          ["e", "interval,timeout", 90],
          ["f", "dynamic", null],
        ],
      );
      // Re-adding them as read back is accepted (the sync engine adopts tables this way).
      const again = tx();
      for (const { set } of st.sets.values()) again.add(set);
      await n.run(again);
    },
  },
  {
    name: "set and map redefinition",
    async run(c) {
      const n = c();
      const s: NftSet = { kind: "set", name: "s", type: "ipv4_addr", flags: ["interval"] };
      await n.run(tx().add(table).add(s).add(chain("s")));
      await n.run(tx().add(s));
      await fails(n, tx().add({ ...s, type: "ipv6_addr" }), 0, "exists");
      await fails(n, tx().add({ ...s, flags: [] }), 0, "exists");
      await fails(n, tx().create(s), 0, "exists");
      await fails(
        n,
        tx().add({ kind: "map", name: "s", type: "ipv4_addr", dataType: "verdict" }),
        0,
        "exists",
      );
      const st = await mustList(n);
      assert.deepEqual([[...st.sets.keys()], [...st.chains.keys()]], [["s"], ["s"]]);
    },
  },
  {
    name: "flush chain, set, map and table",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a")).add(chain("b"))
          .add(rule("a", "jump b"))
          .add(rule("b", "ip daddr 198.18.0.1 drop"))
          .add({ kind: "set", name: "s", type: "ipv4_addr" })
          .add({ kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" })
          .add(el("s", ["198.18.0.1"]))
          .add(el("m", ["198.18.0.1"], ["goto b"]))
          .add(el("m", ["198.18.0.2"], ["drop"])),
      );
      await n.run(tx().flush(chain("b")));
      let st = await mustList(n);
      assert.equal(rulesOf(st, "b").length, 0);
      assert.equal(rulesOf(st, "a").length, 1);
      // flush table drops every rule but keeps chains, sets and elements.
      await n.run(tx().flush(table));
      st = await mustList(n);
      assert.deepEqual([rulesOf(st, "a").length, st.chains.size], [0, 2]);
      assert.deepEqual([st.sets.get("s")!.elements.length, st.maps.get("m")!.elements.length], [
        1,
        2,
      ]);
      // The map element still holds b.
      await fails(n, tx().delete(chain("b")), 0, "busy");
      await n.run(tx().flush({ kind: "set", name: "s", type: "ipv4_addr" }));
      await n.run(tx().flush({ kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" }));
      st = await mustList(n);
      assert.deepEqual([st.sets.get("s")!.elements.length, st.maps.get("m")!.elements.length], [
        0,
        0,
      ]);
      await n.run(tx().delete(chain("b")));
      await fails(n, tx().flush(chain("nope")), 0, "notFound");
      await fails(n, tx().flush({ kind: "set", name: "nope", type: "ipv4_addr" }), 0, "notFound");
      // nft checks the kind on flush: m is a map, not a set.
      await fails(n, tx().flush({ kind: "set", name: "m", type: "ipv4_addr" }), 0, "notFound");
    },
  },
  {
    name: "deleting a map releases the chains its elements point at",
    async run(c) {
      const n = c();
      const m = { kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" } as const;
      await n.run(tx().add(table).add(chain("x")).add(m).add(el("m", ["198.18.0.1"], ["goto x"])));
      await fails(n, tx().delete(chain("x")), 0, "busy");
      await n.run(tx().delete(m).delete(chain("x")));
      const st = await mustList(n);
      assert.deepEqual([st.chains.size, st.maps.size], [0, 0]);
    },
  },
  {
    name: "atomicity: a failing op leaves nothing of the transaction applied",
    async run(c) {
      const n = c();
      // Even the table itself is not created when a later op fails.
      await fails(n, tx().add(table).add(chain("a")).add(rule("a", "jump nope")), 2, "notFound");
      assert.equal(await n.list(), null);
      await n.run(
        tx().add(table).add(chain("a")).add({ kind: "set", name: "s", type: "ipv4_addr" })
          .add(el("s", ["198.18.0.1"])).add(rule("a", "ip daddr @s drop")),
      );
      const big = tx()
        .add(chain("b"))
        .add(rule("a", "jump b"))
        .add(el("s", ["198.18.0.2"]))
        .delete(el("s", ["198.18.0.1"]))
        .flush(chain("a"))
        .add(rule("b", "ip daddr 198.18.0.3 drop"))
        .add(el("s", ["198.18.0.4"]))
        .delete(chain("a"))
        .add(rule("b", "goto gone"));
      await fails(n, big, 8, "notFound");
      await fails(n, tx().delete(table).add(table).add(chain("x")).delete(chain("y")), 3, "any");
      const st = await mustList(n);
      assert.deepEqual(keys(st.sets.get("s")!.elements), ["198.18.0.1"]);
    },
  },
  {
    name: "check() validates without applying",
    async run(c) {
      const n = c();
      await n.check(tx().add(table).add(chain("a")).add(rule("a", "ip daddr 198.18.0.1 drop")));
      assert.equal(await n.list(), null);
      await n.run(tx().add(table).add(chain("a")));
      let err: unknown;
      try {
        await n.check(tx().add(chain("b")).add(rule("a", "jump nope")));
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof NftablesError);
      assert.equal(err.failedOperation, 1);
      await n.check(tx().add(chain("b")).add(rule("a", "jump b")));
      assert.deepEqual(await n.listChains(), ["a"]);
    },
  },
  {
    name: "ip6 table: addresses come back canonical",
    async run(c) {
      const n = c("ip6");
      assert.equal(n.family, "ip6");
      await n.run(
        tx().add(table)
          .add({ kind: "set", name: "v6", type: "ipv6_addr" })
          .add({ kind: "set", name: "nets", type: "ipv6_addr", flags: ["interval"] })
          .add({
            kind: "map",
            name: "svc",
            type: "ipv6_addr . inet_proto . inet_service",
            dataType: "ipv6_addr . inet_service",
          })
          .add(el("v6", ["2001:0db8:0:0::1"]))
          .add(el("v6", ["2001:db8:0:0:1:0:0:1"]))
          .add(el("v6", ["::ffff:198.18.0.1"]))
          .add(el("v6", ["::198.18.0.1"]))
          .add(el("v6", ["0:0:0:0:0:1:0:1"]))
          .add(el("v6", ["::0.0.0.2"]))
          .add(el("v6", ["2001:DB8:0:0:1::"]))
          .add(el("v6", ["1:0:0:2:0:0:0:3"]))
          .add(el("nets", ["2001:db8:1::/48"]))
          .add(el("svc", ["2001:db8::a", "tcp", "80"], ["2001:db8::b", "8080"])),
      );
      assert.deepEqual(keys(await n.listElements("set", "v6")), [
        "1:0:0:2::3",
        "2001:db8:0:0:1::",
        "2001:db8::1",
        "2001:db8::1:0:0:1",
        "::198.18.0.1",
        "::1:0:1",
        "::2",
        "::ffff:198.18.0.1",
      ]);
      assert.deepEqual(keys(await n.listElements("set", "nets")), ["2001:db8:1::/48"]);
      assert.deepEqual(keys(await n.listElements("map", "svc")), [
        "2001:db8::a . tcp . 80 : 2001:db8::b . 8080",
      ]);
      await fails(n, tx().add(el("v6", ["198.18.0.1"])), 0, "any");
    },
  },
  {
    name: "dynamic timeout sets and update rules",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("a"))
          .add({
            kind: "set",
            name: "affinity",
            type: "ipv4_addr",
            flags: ["dynamic", "timeout"],
            timeout: 10800,
          })
          .add(rule("a", "update @affinity { ip saddr }"))
          .add(rule("a", "ip saddr @affinity drop")),
      );
      const st = await mustList(n);
      const s = st.sets.get("affinity")!.set;
      assert.deepEqual([flags(s.flags), s.timeout], ["dynamic,timeout", 10800]);
      // update's braces hold a key, not an anonymous set: handles 1, 2, 3, 4.
      assert.deepEqual(rulesOf(st, "a").map((r) => r.handle), [3, 4]);
      await fails(n, tx().delete({ kind: "set", name: "affinity", type: "ipv4_addr" }), 0, "busy");
      // Re-adding the set takes the new default timeout (kernel 6.x set update).
      const again = { kind: "set", name: "affinity", type: "ipv4_addr" } as const;
      await n.run(tx().add({ ...again, flags: ["dynamic", "timeout"], timeout: 3600 }));
      assert.equal((await mustList(n)).sets.get("affinity")!.set.timeout, 3600);
    },
  },
  {
    name: "a kube-proxy shaped table round-trips",
    async run(c) {
      const n = c();
      const svc = "service-ULMVA6XW-ns1/svc1/tcp/p80";
      const ep = "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__198.18.0.10/80";
      await n.run(
        tx().add({ kind: "table", comment: "rules for kube-proxy" })
          .add(chain("nat-prerouting", { ...natPre }))
          .add(chain("services"))
          .add(chain(svc))
          .add(chain(ep))
          .add({
            kind: "map",
            name: "service-ips",
            type: "ipv4_addr . inet_proto . inet_service",
            dataType: "verdict",
          })
          .add(rule("nat-prerouting", "jump services"))
          .add(rule("services", "ip daddr . meta l4proto . th dport vmap @service-ips"))
          .add(rule(svc, `goto ${ep}`, { comment: "ns1/svc1:p80" }))
          .add(rule(ep, "meta l4proto tcp dnat to 198.18.0.10:80"))
          .add(el("service-ips", ["198.18.100.1", "tcp", "80"], [`goto ${svc}`], "ns1/svc1:p80")),
      );
      const st = await mustList(n);
      assert.equal(st.comment, "rules for kube-proxy");
      assert.equal(st.chains.size, 4);
      assert.deepEqual(rulesOf(st, svc).map((r) => [r.rule, r.comment]), [
        [`goto ${ep}`, "ns1/svc1:p80"],
      ]);
      assert.deepEqual(keys(st.maps.get("service-ips")!.elements), [
        `198.18.100.1 . tcp . 80 : goto ${svc}`,
      ]);
      // Removing the service: element and chains in one transaction.
      await n.run(
        tx().delete(el("service-ips", ["198.18.100.1", "tcp", "80"]))
          .delete(chain(svc)).delete(chain(ep)),
      );
      assert.deepEqual((await n.listChains()).sort(), ["nat-prerouting", "services"]);
    },
  },
  ...rejectionCases,
];
