/**
 * Contract cases for sets, maps and their elements (see nftables_cases.ts): element adds and
 * deletes, verdict and data maps, intervals and concatenations, type checks, flags and
 * timeouts, redefinition, flush, and a map's release of the chains it points at.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type Element, type Set as NftSet } from "../../ffi/nftables/types.ts";
import {
  chain,
  type ContractCase,
  el,
  fails,
  flags,
  keys,
  mustList,
  norm,
  rule,
  rulesOf,
  table,
  tx,
} from "./nftables_helpers.ts";

/** Cases of sets, maps and elements. */
export const elementCases: ContractCase[] = [
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
];
