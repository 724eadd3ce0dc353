/**
 * Real-kernel contract of the raw netlink element path (ffi/nftables/netlink):
 * the same element operations written raw and written by libnftables leave
 * identical tables (keys, values, verdicts, comments; typeof maps; IPv4 and
 * IPv6), a refused batch leaves nothing applied, and the client falls back to
 * libnftables with its error text. Runs inside a test network namespace only
 * (tests/e2e/contract_test.ts starts it there with KNP_IN_TEST_NETNS=1).
 *
 * @module
 */
import assert from "node:assert/strict";
import { openNftables } from "../../ffi/nftables/client.ts";
import { RawElementWriter } from "../../ffi/nftables/netlink/writer.ts";
import {
  type Element,
  type Map as NftMap,
  type NftablesClient,
  type Operation,
  type Set as NftSet,
  Transaction,
} from "../../ffi/nftables/types.ts";
import { summarize } from "./nftables_cases.ts";

const inNetns = Deno.env.get("KNP_IN_TEST_NETNS") === "1";

function declarations(v6: boolean): (NftSet | NftMap)[] {
  const a = v6 ? "ipv6_addr" : "ipv4_addr", ip = v6 ? "ip6" : "ip";
  return [
    { kind: "map", name: "vm", type: `${a} . inet_proto . inet_service`, dataType: "verdict" },
    { kind: "map", name: "npv", type: "inet_proto . inet_service", dataType: "verdict" },
    { kind: "set", name: "ips", type: a },
    { kind: "set", name: "pairs", type: `${a} . ${a}` },
    {
      kind: "map",
      name: "buckets",
      type: `typeof ${ip} daddr . meta l4proto . th dport . numgen random mod 1`,
      dataType: `${ip} daddr . udp dport`,
    },
    {
      kind: "map",
      name: "npbuckets",
      type: "typeof meta l4proto . th dport . numgen random mod 1",
      dataType: `${ip} daddr . sctp dport`,
    },
  ];
}

function elements(v6: boolean): Element[] {
  const a = (i: number) => (v6 ? `2001:db8:ffff::${i.toString(16)}` : `198.19.0.${i}`);
  const out: Element[] = [];
  for (let i = 1; i <= 40; i++) {
    out.push({
      kind: "element",
      map: "vm",
      key: [`${a(i)} . tcp . ${80 + i}`],
      value: ["goto c"],
      comment: `ns/s${i}:p`,
    });
    out.push({ kind: "element", set: "ips", key: [a(i)], comment: `ns/s${i}` });
    out.push({ kind: "element", set: "pairs", key: [a(i), a(i)] });
    for (let b = 0; b < 3; b++) {
      out.push({
        kind: "element",
        map: "buckets",
        key: [`${a(i)} . udp . 53`, String(b)],
        value: [`${a(100 + b)} . 5353`],
      });
    }
  }
  out.push({ kind: "element", map: "npv", key: ["udp . 30053"], value: ["drop"] });
  out.push({ kind: "element", map: "npv", key: ["tcp . 30080"], value: ["goto c"], comment: "x" });
  out.push({
    kind: "element",
    map: "npbuckets",
    key: ["sctp . 30090 . 0"],
    value: [`${a(7)} . 9`],
  });
  return out;
}

function declare(tx: Transaction, v6: boolean): Transaction {
  tx.add({ kind: "table" });
  tx.add({ kind: "chain", name: "c" });
  for (const d of declarations(v6)) tx.add(d);
  return tx;
}

const adds = (els: Element[]): Operation[] => els.map((obj) => ({ verb: "add", obj }));

async function drop(c: NftablesClient): Promise<void> {
  if (await c.list() !== null) await c.run(new Transaction().delete({ kind: "table" }));
}

for (const v6 of [false, true]) {
  const family = v6 ? "ip6" : "ip";
  Deno.test({
    name: `raw elements (${family}): written raw, listed exactly as libnftables writes them`,
    ignore: !inNetns,
    async fn() {
      const viaLib = openNftables(family, "knp-raw-lib", { rawElements: false });
      const viaRaw = openNftables(family, "knp-raw-raw", { rawElements: false });
      const writer = new RawElementWriter(family, "knp-raw-raw");
      try {
        for (const c of [viaLib, viaRaw]) await c.run(declare(new Transaction(), v6));
        writer.learnDeclarations(declarations(v6));
        const els = elements(v6);
        await viaLib.run(Object.assign(new Transaction(), { ops: adds(els) }));
        const batch = writer.encode(adds(els));
        assert.ok(batch !== undefined, "every element is encodable");
        assert.equal(await writer.send(batch), true);
        assert.deepEqual(summarize(await viaRaw.list()), summarize(await viaLib.list()));
        // Deletes, raw.
        const dels: Operation[] = els.slice(0, 30).map((e) => {
          const { value: _v, comment: _c, ...key } = e;
          return { verb: "delete", obj: key };
        });
        await viaLib.run(Object.assign(new Transaction(), { ops: dels }));
        assert.equal(await writer.send(writer.encode(dels)!), true);
        assert.deepEqual(summarize(await viaRaw.list()), summarize(await viaLib.list()));
        // A batch the kernel refuses (a changed value for an existing key) applies nothing.
        const before = summarize(await viaRaw.list());
        const bad = adds([
          { kind: "element", set: "ips", key: [v6 ? "2001:db8:ffff::fe" : "198.19.0.254"] },
          {
            // Still there after the deletes above.
            ...els.filter((e) => e.map === "buckets").at(-1)!,
            value: [v6 ? "2001:db8::9 . 1" : "198.18.0.9 . 1"],
          },
        ]);
        assert.equal(await writer.send(writer.encode(bad)!), false);
        assert.deepEqual(summarize(await viaRaw.list()), before);
      } finally {
        writer.close();
        for (const c of [viaLib, viaRaw]) {
          await drop(c);
          c.close();
        }
      }
    },
  });

  Deno.test({
    name:
      `raw elements (${family}): the client falls back to libnftables for errors and unknown sets`,
    ignore: !inNetns,
    async fn() {
      const c = openNftables(family, "knp-raw-client");
      try {
        await c.run(declare(new Transaction(), v6));
        const els = elements(v6);
        await c.run(Object.assign(new Transaction(), { ops: adds(els) }));
        const n = (await c.listElements("map", "buckets")).length;
        assert.equal(n, 120);
        const clash = adds([{
          ...els.find((e) => e.map === "buckets")!,
          value: [v6 ? "2001:db8::9 . 1" : "198.18.0.9 . 1"],
        }]);
        await assert.rejects(
          c.run(Object.assign(new Transaction(), { ops: clash })),
          /File exists|exists/,
          "the refused batch is redone by libnftables, which says why",
        );
        // A second client knows no declarations: it reads them and still writes raw or falls back.
        const other = openNftables(family, "knp-raw-client");
        try {
          await other.run(Object.assign(new Transaction(), {
            ops: adds([{
              kind: "element",
              set: "ips",
              key: [v6 ? "2001:db8:ffff::fd" : "198.19.0.253"],
            }]),
          }));
        } finally {
          other.close();
        }
        assert.equal((await c.listElements("set", "ips")).length, 41);
      } finally {
        await drop(c);
        c.close();
      }
    },
  });
}
