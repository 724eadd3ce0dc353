/**
 * Contract cases for what nft 1.0.6 refuses beyond objects and references,
 * measured in a test namespace with `nft -f` before they were written down:
 * rule expressions (unknown words, lookups of a set of another type, rules on
 * a read-back map whose `typeof` value is `ip daddr . th dport`), comments
 * over 128 bytes, and what an element delete does with a comment or value.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  chain,
  type ContractCase,
  el,
  fails,
  keys,
  mustList,
  natPre,
  rule,
  rulesOf,
  table,
  tx,
} from "./nftables_helpers.ts";

const ascii = (n: number) => "a".repeat(n);
/** `é` is two bytes of UTF-8: 64 of them are 128 bytes, 65 are 130. */
const twoByte = (n: number) => "\u00e9".repeat(n);

const s4 = { kind: "set", name: "s4", type: "ipv4_addr" } as const;
const s6 = { kind: "set", name: "s6", type: "ipv6_addr" } as const;
const sc = { kind: "set", name: "sc", type: "ipv4_addr . inet_service" } as const;

/** A map whose typeof value joins `ip daddr` and a transport port. */
const dnatMap = (name: string, port: string) => ({
  kind: "map" as const,
  name,
  type: "typeof ip daddr . meta l4proto . th dport . numgen random mod 1",
  dataType: `ip daddr . ${port}`,
});
const dnatRule = (map: string, mod: number) =>
  rule(
    "pre",
    `dnat ip to ip daddr . meta l4proto . th dport . numgen random mod ${mod} map @${map}`,
  );

/** The rejection cases, appended to the contract suite. */
export const rejectionCases: ContractCase[] = [
  {
    name: "rule expressions: unknown words and lookups of a set of another type are refused",
    async run(c) {
      const n = c();
      await n.run(tx().add(table).add(chain("c")).add(s4).add(s6).add(sc));
      await n.run(
        tx().add(rule("c", "ip daddr @s4 drop")).add(rule("c", "ip daddr . th dport @sc drop")),
      );
      // nft: "syntax error, unexpected drop" (the unknown word is read as a name).
      await fails(
        n,
        tx().add(rule("c", "ip saddr @s4 accept")).add(rule("c", "frobnicate drop")),
        1,
        "any",
      );
      // nft: "syntax error, unexpected newline".
      await fails(n, tx().add(rule("c", "ip daddr 1.2.3.4 counter bogus")), 0, "any");
      // nft: "datatype mismatch, expected IPv4 address, expression has type IPv6 address".
      await fails(
        n,
        tx().add(rule("c", "ip saddr @s4 accept")).add(rule("c", "ip daddr @s6 drop")),
        1,
        "any",
      );
      // nft: "... expression has type concatenation of (IPv4 address, internet network service)".
      await fails(n, tx().add(rule("c", "ip daddr @sc drop")), 0, "any");
      assert.equal(rulesOf(await mustList(n), "c").length, 2);
    },
  },
  {
    name:
      "a map typed `ip daddr . th dport` takes rules only in the batch that creates it (nft 1.0.6)",
    async run(c) {
      const n = c();
      await n.run(
        tx().add(table).add(chain("pre", natPre)).add(dnatMap("m", "th dport"))
          .add(dnatMap("mu", "udp dport")).add(dnatRule("m", 2)),
      );
      // Read back from the kernel, the map makes nft refuse the rule:
      // "conflicting protocols specified: ip vs. th". A protocol in the typeof is fine.
      await fails(n, tx().add(dnatRule("mu", 2)).add(dnatRule("m", 3)), 1, "any");
      await n.run(tx().add(dnatRule("mu", 3)));
      assert.equal(rulesOf(await mustList(n), "pre").length, 2);
    },
  },
  {
    name: "comments: at most 128 bytes of UTF-8 on tables, chains, sets, rules and elements",
    async run(c) {
      const n = c();
      // nft: "comment too long, 128 characters maximum allowed" (it counts bytes).
      await fails(n, tx().add({ kind: "table", comment: ascii(129) }), 0, "any");
      await n.run(tx().add({ kind: "table", comment: ascii(128) }).add(chain("c")).add(s4));
      await n.run(
        tx().add(rule("c", "accept", { comment: ascii(128) }))
          .add(rule("c", "accept", { comment: twoByte(64) })),
      );
      await fails(n, tx().add(rule("c", "accept", { comment: ascii(129) })), 0, "any");
      await fails(
        n,
        tx().add(rule("c", "drop")).add(rule("c", "accept", { comment: twoByte(65) })),
        1,
        "any",
      );
      await fails(n, tx().add(chain("d", { comment: ascii(129) })), 0, "any");
      await fails(n, tx().add({ ...s6, comment: ascii(129) }), 0, "any");
      await n.run(tx().add(s4).add(el("s4", ["1.1.1.1"], undefined, ascii(128))));
      await fails(n, tx().add(s4).add(el("s4", ["1.1.1.2"], undefined, ascii(129))), 1, "any");
      const st = await mustList(n);
      assert.deepEqual(rulesOf(st, "c").map((r) => r.comment), [ascii(128), twoByte(64)]);
      assert.equal(st.sets.get("s4")?.elements[0].comment, ascii(128));
    },
  },
  {
    name:
      "element deletes ignore a comment or value, even a wrong one, but not an over-long comment",
    async run(c) {
      const n = c();
      const m = { kind: "map", name: "m", type: "ipv4_addr", dataType: "ipv4_addr" } as const;
      await n.run(
        tx().add(table).add(s4).add(m)
          .add(el("s4", ["1.1.1.1"], undefined, "x")).add(el("s4", ["1.1.1.2"]))
          .add(el("s4", ["1.1.1.3"])).add(el("m", ["1.1.1.1"], ["2.2.2.2"]))
          .add(el("m", ["1.1.1.2"], ["2.2.2.2"])),
      );
      await n.run(
        tx().delete(el("s4", ["1.1.1.1"], undefined, "x"))
          .delete(el("s4", ["1.1.1.2"], undefined, "y"))
          .delete(el("m", ["1.1.1.1"], ["2.2.2.2"]))
          .delete(el("m", ["1.1.1.2"], ["3.3.3.3"])),
      );
      // nft: "comment too long, 128 characters maximum allowed".
      await fails(n, tx().add(s4).delete(el("s4", ["1.1.1.3"], undefined, ascii(129))), 1, "any");
      const st = await mustList(n);
      assert.deepEqual(keys(st.sets.get("s4")!.elements), ["1.1.1.3"]);
      assert.deepEqual(keys(st.maps.get("m")!.elements), []);
    },
  },
];
