/**
 * The nftables contract suite: cases that any {@link NftablesClient} must pass,
 * run against the in-memory nftables (ffi/nftables/memory/contract_test.ts) and
 * against the real kernel inside a test namespace
 * (tests/contract/real_contract_test.ts), so the fake cannot drift from the
 * kernel. Every case starts from a table that does not exist yet. The cases live by
 * subject: objects and references (nftables_objects.ts), sets, maps and elements
 * (nftables_elements.ts), what the kernel refuses (nftables_rejections.ts), and here
 * transactions, IPv6 and whole tables.
 *
 * Only what both sides agree on is compared: rule handles, comments, counts,
 * set/map definitions and canonical element text; rule text only for bodies
 * that the kernel lists back unchanged (`jump X`, `ip daddr A drop`, ...).
 *
 * @module
 */
import assert from "node:assert/strict";
import { NftablesError } from "../../ffi/nftables/types.ts";
import {
  chain,
  type ContractCase,
  el,
  fails,
  flags,
  keys,
  mustList,
  natPre,
  rule,
  rulesOf,
  table,
  tx,
} from "./nftables_helpers.ts";
import { elementCases } from "./nftables_elements.ts";
import { objectCases } from "./nftables_objects.ts";
import { rejectionCases } from "./nftables_rejections.ts";
import { counterCases } from "./nftables_counters.ts";

export { type ClientFactory, type ContractCase, summarize } from "./nftables_helpers.ts";

/** Every contract case. */
export const cases: ContractCase[] = [
  ...objectCases,
  ...elementCases,
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
  ...counterCases,
];
