import assert from "node:assert/strict";
import { MemoryNftables } from "./client.ts";
import { renderOperation } from "../script.ts";
import { NftablesError, Transaction } from "../types.ts";

const tx = () => new Transaction();

async function rejects(f: MemoryNftables, t: Transaction): Promise<NftablesError> {
  let err: unknown;
  try {
    await f.run(t);
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof NftablesError, `expected NftablesError, got ${String(err)}`);
  return err;
}

function sample(): Transaction {
  return tx()
    .add({ kind: "table", comment: "rules for kube-proxy" })
    .add({ kind: "chain", name: "services" })
    .add({ kind: "chain", name: "nat-prerouting", type: "nat", hook: "prerouting", priority: -100 })
    .add({ kind: "chain", name: "svc-b" })
    .add({ kind: "chain", name: "svc-a" })
    .add({
      kind: "map",
      name: "service-ips",
      type: "ipv4_addr . inet_proto . inet_service",
      dataType: "verdict",
      comment: "ClusterIPs",
    })
    .add({ kind: "set", name: "cluster-ips", type: "ipv4_addr" })
    .add({
      kind: "set",
      name: "affinity",
      type: "ipv4_addr",
      flags: ["timeout", "dynamic"],
      timeout: 10800,
    })
    .add({ kind: "rule", chain: "nat-prerouting", rule: "jump services" })
    .add({
      kind: "rule",
      chain: "services",
      rule: "ip daddr . meta l4proto . th dport vmap @service-ips",
    })
    .add({ kind: "rule", chain: "svc-a", rule: "meta l4proto tcp dnat to 198.18.1.1:80" })
    .add({ kind: "rule", chain: "svc-b", rule: 'update @affinity { ip saddr } comment "sticky"' })
    .add({
      kind: "element",
      map: "service-ips",
      key: ["198.18.0.2", "17", "53"],
      value: ["goto svc-b"],
    })
    .add({
      kind: "element",
      map: "service-ips",
      key: ["198.18.0.1", "tcp", "80"],
      value: ["goto svc-a"],
      comment: "ns/a:http",
    })
    .add({ kind: "element", set: "cluster-ips", key: ["198.18.0.2"] })
    .add({ kind: "element", set: "cluster-ips", key: ["198.18.0.1"] });
}

Deno.test("dump is stable: sorted sets, maps, chains and elements; no handles", async () => {
  const f = new MemoryNftables("ip", "kube-proxy");
  await f.run(sample());
  assert.equal(
    f.dump(),
    `table ip kube-proxy {
	comment "rules for kube-proxy"
	set affinity {
		type ipv4_addr
		flags dynamic,timeout
		timeout 3h
	}
	set cluster-ips {
		type ipv4_addr
		elements = {
			198.18.0.1,
			198.18.0.2
		}
	}
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "ClusterIPs"
		elements = {
			198.18.0.1 . tcp . 80 comment "ns/a:http" : goto svc-a,
			198.18.0.2 . udp . 53 : goto svc-b
		}
	}
	chain nat-prerouting {
		type nat hook prerouting priority -100; policy accept;
		jump services
	}
	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
	chain svc-a {
		meta l4proto tcp dnat to 198.18.1.1:80
	}
	chain svc-b {
		update @affinity { ip saddr } comment "sticky"
	}
}
`,
  );
  // The same content built in another order dumps identically.
  const g = new MemoryNftables("ip", "kube-proxy");
  await g.run(tx().add({ kind: "table", comment: "rules for kube-proxy" }));
  await g.run(new Transaction());
  const rest = sample().ops.slice(1).reverse();
  const ordered = tx();
  // Definitions first (chains, sets, maps), then rules, then elements.
  for (const kind of ["chain", "map", "set", "rule", "element"]) {
    for (const op of rest) if (op.obj.kind === kind) ordered.ops.push(op);
  }
  await g.run(ordered);
  assert.equal(g.dump(), f.dump());
  assert.equal(new MemoryNftables("ip6", "x").dump(), "");
});

Deno.test("lastTransaction, opCounts and failedRuns record every run", async () => {
  const f = new MemoryNftables("ip", "t");
  assert.equal(f.lastOpCount, 0);
  const t1 = sample();
  await f.run(t1);
  assert.equal(f.lastTransaction, t1);
  assert.equal(f.lastOpCount, t1.size);
  await f.run(tx());
  assert.deepEqual(f.opCounts, [t1.size, 0]);
  const bad = tx().add({ kind: "chain", name: "x" }).add({
    kind: "rule",
    chain: "nope",
    rule: "accept",
  });
  await rejects(f, bad);
  assert.equal(f.lastTransaction, bad);
  assert.equal(f.failedRuns, 1);
  assert.deepEqual(f.opCounts, [t1.size, 0]);
  // check() neither applies nor counts.
  await f.check(tx().add({ kind: "chain", name: "y" }));
  assert.deepEqual(f.opCounts, [t1.size, 0]);
  assert.equal(f.state()!.chains.has("y"), false);
});

Deno.test("errors carry the failing op index and its rendering; nothing is applied", async () => {
  const f = new MemoryNftables("ip", "t");
  await f.run(sample());
  const before = f.dump();
  const bad = tx()
    .add({ kind: "chain", name: "new" })
    .add({ kind: "element", set: "cluster-ips", key: ["198.18.0.9"] })
    .delete({ kind: "chain", name: "svc-a" });
  const err = await rejects(f, bad);
  assert.equal(err.failedOperation, 2);
  assert.equal(err.failedCommand, renderOperation("ip", "t", bad.ops[2]));
  assert.match(err.message, /Device or resource busy/);
  assert.equal(f.dump(), before);
});

Deno.test("a failed transaction does not burn rule handles", async () => {
  const f = new MemoryNftables("ip", "t");
  await f.run(tx().add({ kind: "table" }).add({ kind: "chain", name: "a" }));
  await rejects(
    f,
    tx().add({ kind: "rule", chain: "a", rule: "ip daddr 198.18.0.1 drop" }).add({
      kind: "rule",
      chain: "a",
      rule: "jump nope",
    }),
  );
  await f.run(tx().add({ kind: "rule", chain: "a", rule: "ip daddr 198.18.0.1 drop" }));
  assert.deepEqual(f.state()!.chains.get("a")!.rules.map((r) => r.handle), [2]);
});

Deno.test("state() returns copies and moves a body comment into `comment`", async () => {
  const f = new MemoryNftables("ip", "t");
  await f.run(sample());
  const st = f.state()!;
  const rule = st.chains.get("svc-b")!.rules[0];
  assert.deepEqual(rule, {
    kind: "rule",
    chain: "svc-b",
    rule: "update @affinity { ip saddr }",
    comment: "sticky",
    handle: 11,
  });
  rule.rule = "changed";
  st.chains.delete("services");
  st.sets.get("cluster-ips")!.elements.length = 0;
  const again = f.state()!;
  assert.equal(again.chains.get("svc-b")!.rules[0].rule, "update @affinity { ip saddr }");
  assert.ok(again.chains.has("services"));
  assert.equal(again.sets.get("cluster-ips")!.elements.length, 2);
  const err = await rejects(
    f,
    tx().add({ kind: "rule", chain: "svc-a", rule: 'accept comment "a"', comment: "b" }),
  );
  assert.match(err.message, /two comments/);
});

Deno.test("elements are stored in canonical form", async () => {
  const f = new MemoryNftables("ip6", "t");
  await f.run(
    tx().add({ kind: "table" })
      .add({ kind: "set", name: "a", type: "ipv6_addr", flags: ["interval"] })
      .add({ kind: "set", name: "m", type: "mark . ether_addr" })
      .add({ kind: "set", name: "p", type: "inet_proto" }),
  );
  const adds = [
    "0:0:0:0:0:0:0:0",
    "0:0:0:0:0:0:0:1",
    "2001:DB8:0:0:0:0:0:0",
    "1:0:0:1:0:0:0:1",
    "2001:db8:0:1:1:1:1:1",
    "2001:db8::ffff:198.18.0.1",
    "2001:db8:1:0:0:0:0:0/48",
    "2001:db8:2::1-2001:db8:2::ff",
    // Measured with nft 1.0.6 (inet_ntop): IPv4 tails only for ::/96 and ::ffff:0:0/96.
    "::ffff:198.18.0.1",
    "::198.18.0.1",
    "0:0:0:0:0:1:0:1",
    "::0.0.0.2",
    "2001:db8:0:0:1::",
    "1:0:0:2:0:0:0:3",
  ];
  const t = tx();
  for (const k of adds) t.add({ kind: "element", set: "a", key: [k] });
  t.add({ kind: "element", set: "m", key: ["0x10", "0A:b:0c:0d:0e:0f"] });
  t.add({ kind: "element", set: "m", key: ["17 . 00:00:00:00:00:01"] });
  for (const p of ["6", "udp", "132", "250"]) t.add({ kind: "element", set: "p", key: [p] });
  await f.run(t);
  const keys = async (n: string) =>
    (await f.listElements("set", n)).map((e) => e.key.join(" . ")).sort();
  assert.deepEqual(await keys("a"), [
    "1:0:0:1::1",
    "1:0:0:2::3",
    "2001:db8:0:0:1::",
    "2001:db8:0:1:1:1:1:1",
    "2001:db8:1::/48",
    "2001:db8:2::1-2001:db8:2::ff",
    "2001:db8::",
    "2001:db8::ffff:c612:1",
    "::",
    "::1",
    "::198.18.0.1",
    "::1:0:1",
    "::2",
    "::ffff:198.18.0.1",
  ]);
  assert.deepEqual(await keys("m"), [
    "0x00000010 . 0a:0b:0c:0d:0e:0f",
    "0x00000011 . 00:00:00:00:00:01",
  ]);
  assert.deepEqual(await keys("p"), ["250", "sctp", "tcp", "udp"]);
  await assert.rejects(f.listElements("map", "a"), /No such file or directory/);
});

Deno.test("bad input gets a clear error", async () => {
  const f = new MemoryNftables("ip", "t");
  await f.run(tx().add({ kind: "table" }).add({ kind: "chain", name: "a" }));
  const cases: [Transaction, RegExp][] = [
    [tx().add({ kind: "set", name: "s", type: "ipv4_address" }), /unknown datatype "ipv4_address"/],
    [tx().add({ kind: "chain", name: "dnat" }), /"dnat" is an nft keyword/],
    [tx().add({ kind: "chain", name: "has space" }), /must not contain spaces/],
    [tx().add({ kind: "chain", name: "x".repeat(256) }), /1-255 characters/],
    [tx().add({ kind: "chain", name: "b", type: "nat" }), /needs both type and hook/],
    [tx().add({ kind: "rule", chain: "a", rule: "ip daddr { 198.18.0.1" }), /unbalanced "\{"/],
    [tx().add({ kind: "rule", chain: "a", rule: 'accept comment "x' }), /unterminated string/],
    [tx().add({ kind: "rule", chain: "a", rule: "jump" }), /jump needs a chain name/],
    [tx().replace({ kind: "rule", chain: "a", rule: "accept" }), /needs a rule handle/],
    [
      tx().add({ kind: "set", name: "s", type: "ipv4_addr" }).add({
        kind: "element",
        set: "s",
        key: ["198.18.0.1"],
        value: ["accept"],
      }),
      /cannot have a value/,
    ],
    [
      tx().add({ kind: "map", name: "m", type: "ipv4_addr", dataType: "verdict" }).add({
        kind: "element",
        map: "m",
        key: ["198.18.0.1"],
      }),
      /needs a value/,
    ],
    [
      tx().add({ kind: "map", name: "m", type: "verdict", dataType: "verdict" }),
      /verdict can only be/,
    ],
  ];
  for (const [t, re] of cases) {
    const err = await rejects(f, t);
    assert.match(err.message, re);
    assert.equal(err.failedOperation, t.size - 1);
  }
});

Deno.test("close() makes later use throw", async () => {
  const f = new MemoryNftables("ip", "t");
  f.close();
  await assert.rejects(f.run(tx().add({ kind: "table" })), /after close/);
  assert.throws(() => f.state(), /after close/);
});

Deno.test("a small change to a large table is cheap (copy-on-write)", async () => {
  const f = new MemoryNftables("ip", "kube-proxy");
  const big = tx().add({ kind: "table" })
    .add({ kind: "chain", name: "pre", type: "nat", hook: "prerouting", priority: -100 })
    .add({
      kind: "map",
      name: "svc",
      type: "ipv4_addr . inet_proto . inet_service",
      dataType: "verdict",
    })
    .add({ kind: "rule", chain: "pre", rule: "ip daddr . meta l4proto . th dport vmap @svc" });
  for (let i = 0; i < 5000; i++) {
    big.add({ kind: "chain", name: `s${i}` });
    big.add({ kind: "rule", chain: `s${i}`, rule: `meta l4proto tcp dnat to 198.19.0.1:${i}` });
    big.add({
      kind: "element",
      map: "svc",
      key: [`198.18.${i >> 8}.${i & 255}`, "tcp", "80"],
      value: [`goto s${i}`],
    });
  }
  await f.run(big);
  const t0 = performance.now();
  for (let i = 0; i < 20; i++) {
    await f.run(
      tx().add({
        kind: "element",
        map: "svc",
        key: ["198.19.9.9", "tcp", `${i}`],
        value: ["goto s1"],
      }),
    );
  }
  const perRun = (performance.now() - t0) / 20;
  assert.ok(perRun < 50, `one-element run took ${perRun.toFixed(1)} ms on a 5k-service table`);
  assert.equal(f.state()!.maps.get("svc")!.elements.length, 5020);
});
