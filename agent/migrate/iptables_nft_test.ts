/**
 * --cleanup-iptables-nft against the in-memory nftables holding iptables-nft's shapes: the
 * tables, base chains and rules as `nft -a list` shows what iptables-nft 1.8.9 wrote for
 * kube-proxy (the `-m comment` matches list as nothing).
 */
import assert from "node:assert/strict";
import { Registry } from "../../net/prometheus.ts";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import { type Family, type NftablesClient, Transaction } from "../../ffi/nftables/types.ts";
import { FLAGS, parseArgs } from "../flags.ts";
import { Logger } from "../log.ts";
import type { NodeEvent } from "../kube/events.ts";
import { afterFirstSync, REMOVED_METRIC, removeIptablesNft } from "./iptables_nft.ts";
import { type IptTable, planTable } from "./iptables_nft_plan.ts";
import { legacyRefusal, readLegacyTables } from "./legacy_iptables.ts";

const C = "counter packets 0 bytes 0";

/** kube-proxy's iptables-mode nat table, with a foreign chain and rule beside it. */
function natTx(): Transaction {
  const tx = new Transaction().add({ kind: "table" });
  for (
    const [name, hook, priority] of [
      ["PREROUTING", "prerouting", -100],
      ["OUTPUT", "output", -100],
      ["POSTROUTING", "postrouting", 100],
    ] as const
  ) {
    tx.add({ kind: "chain", name, type: "nat", hook, priority, policy: "accept" });
  }
  for (
    const c of [
      "KUBE-SERVICES",
      "KUBE-SVC-ABC",
      "KUBE-SEP-XYZ",
      "KUBE-POSTROUTING",
      "KUBE-MARK-MASQ",
      "KUBE-MARK-DROP",
      "KUBE-KUBELET-CANARY",
      "KUBE-PROXY-CANARY",
      "FOREIGN",
    ]
  ) tx.add({ kind: "chain", name: c });
  const rule = (chain: string, rule: string) => tx.add({ kind: "rule", chain, rule });
  rule("KUBE-MARK-MASQ", `${C} meta mark set mark or 0x4000`);
  rule("KUBE-SEP-XYZ", `ip saddr 198.18.1.2 ${C} jump KUBE-MARK-MASQ`);
  rule("KUBE-SEP-XYZ", `meta l4proto tcp ${C} dnat to 198.18.1.2:8080`);
  rule("KUBE-SVC-ABC", `${C} jump KUBE-SEP-XYZ`);
  rule(
    "KUBE-SERVICES",
    `meta l4proto tcp ip daddr 198.19.0.10 tcp dport 80 ${C} jump KUBE-SVC-ABC`,
  );
  rule("KUBE-POSTROUTING", `${C} masquerade fully-random`);
  rule("PREROUTING", `${C} jump KUBE-SERVICES`);
  rule("OUTPUT", `${C} jump KUBE-SERVICES`);
  rule("POSTROUTING", `${C} jump KUBE-POSTROUTING`);
  rule("POSTROUTING", `ip saddr 10.0.0.0/8 ${C} jump FOREIGN`);
  rule("FOREIGN", `${C} masquerade`);
  return tx;
}

function filterTx(): Transaction {
  const tx = new Transaction().add({ kind: "table" });
  for (const [name, hook] of [["INPUT", "input"], ["FORWARD", "forward"]] as const) {
    tx.add({ kind: "chain", name, type: "filter", hook, priority: 0, policy: "accept" });
  }
  for (const c of ["KUBE-FORWARD", "KUBE-EXTERNAL-SERVICES", "KUBE-FIREWALL"]) {
    tx.add({ kind: "chain", name: c });
  }
  tx.add({ kind: "rule", chain: "KUBE-FORWARD", rule: `ct state invalid ${C} drop` });
  tx.add({ kind: "rule", chain: "FORWARD", rule: `${C} jump KUBE-FORWARD` });
  tx.add({ kind: "rule", chain: "INPUT", rule: `ct state new ${C} jump KUBE-EXTERNAL-SERVICES` });
  tx.add({ kind: "rule", chain: "INPUT", rule: `${C} jump KUBE-FIREWALL` });
  tx.add({ kind: "rule", chain: "INPUT", rule: `tcp dport 22 ${C} accept` });
  return tx;
}

/** A client over `m` whose close() leaves `m` open (the test reads it afterwards). */
function keepOpen(m: MemoryNftables): NftablesClient {
  return {
    family: m.family,
    table: m.table,
    run: (tx) => m.run(tx),
    check: (tx) => m.check(tx),
    list: () => m.list(),
    listChains: () => m.listChains(),
    listElements: (k, n) => m.listElements(k, n),
    listSets: () => m.listSets(),
    listChain: (n) => m.listChain(n),
    getElement: (k, n, key) => m.getElement(k, n, key),
    close() {},
  };
}

/** A namespace of in-memory tables, keyed "ip nat". */
async function kernel(build: Partial<Record<string, Transaction>>) {
  const tables = new Map<string, MemoryNftables>();
  for (const fam of ["ip", "ip6"] as Family[]) {
    for (const t of ["nat", "filter", "mangle"]) {
      const m = new MemoryNftables(fam, t);
      const tx = build[`${fam} ${t}`];
      if (tx) await m.run(tx);
      tables.set(`${fam} ${t}`, m);
    }
  }
  return {
    tables,
    // The cleanup closes what it opens; the test keeps reading the same tables.
    open: (f: Family, t: IptTable) => keepOpen(tables.get(`${f} ${t}`)!),
  };
}

function capture() {
  const lines: string[] = [];
  const log = new Logger({
    verbosity: 2,
    sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
  });
  return { lines, log };
}

const noLegacy = () => ({ ipv4: [], ipv6: [] });

Deno.test("iptables-nft cleanup: kube-proxy's chains and jumps go, the rest stays", async () => {
  const k = await kernel({
    "ip nat": natTx(),
    "ip filter": filterTx(),
    "ip6 nat": natTx(),
    "ip mangle": new Transaction().add({ kind: "table" }).add({
      kind: "chain",
      name: "KUBE-PROXY-CANARY",
    }),
  });
  const { lines, log } = capture();
  const registry = new Registry();
  const events: NodeEvent[] = [];
  const report = await removeIptablesNft({
    open: k.open,
    log,
    legacyTables: noLegacy,
    registry,
    event: (e) => events.push(e),
  });
  assert.deepEqual(report.failed, []);
  const nat = (await k.tables.get("ip nat")!.list())!;
  assert.deepEqual([...nat.chains.keys()].sort(), [
    "FOREIGN",
    "KUBE-KUBELET-CANARY",
    "KUBE-MARK-DROP",
    "OUTPUT",
    "POSTROUTING",
    "PREROUTING",
  ]);
  assert.deepEqual(nat.chains.get("PREROUTING")!.rules, []);
  assert.deepEqual(nat.chains.get("POSTROUTING")!.rules.map((r) => r.rule), [
    `ip saddr 10.0.0.0/8 ${C} jump FOREIGN`,
  ]);
  assert.equal(nat.chains.get("FOREIGN")!.rules.length, 1);
  const filter = (await k.tables.get("ip filter")!.list())!;
  assert.deepEqual([...filter.chains.keys()].sort(), ["FORWARD", "INPUT", "KUBE-FIREWALL"]);
  assert.deepEqual(filter.chains.get("INPUT")!.rules.map((r) => r.rule), [
    `${C} jump KUBE-FIREWALL`,
    `tcp dport 22 ${C} accept`,
  ]);
  assert.deepEqual([...(await k.tables.get("ip mangle")!.list())!.chains.keys()], []);
  assert.ok((await k.tables.get("ip6 nat")!.list())!.chains.has("FOREIGN"));
  assert.equal((await k.tables.get("ip6 nat")!.list())!.chains.has("KUBE-SERVICES"), false);

  const text = lines.join("\n");
  assert.match(text, /Removed kube-proxy's iptables-nft rules.*table="ip nat"/);
  assert.match(text, /PREROUTING->KUBE-SERVICES#/);
  assert.match(text, /iptables-nft cleanup done/);
  const metrics = await registry.metrics();
  // ip nat + ip6 nat: 3 jumps and 6 chains each; ip filter: 2 and 2; ip mangle: 0 and 1.
  assert.match(metrics, new RegExp(`${REMOVED_METRIC}\\{ip_family="IPv4",kind="rule"\\} 5`));
  assert.match(metrics, new RegExp(`${REMOVED_METRIC}\\{ip_family="IPv4",kind="chain"\\} 9`));
  assert.match(metrics, new RegExp(`${REMOVED_METRIC}\\{ip_family="IPv6",kind="chain"\\} 6`));
  assert.deepEqual(events.map((e) => e.reason), ["IptablesNftCleanup"]);

  // Idempotent: a second run finds nothing and changes nothing.
  const again = capture();
  const before = k.tables.get("ip nat")!.opCounts.length;
  const second = await removeIptablesNft({ open: k.open, log: again.log, legacyTables: noLegacy });
  assert.deepEqual(second.removed, []);
  assert.equal(k.tables.get("ip nat")!.opCounts.length, before);
  assert.match(again.lines.join("\n"), /No kube-proxy iptables-nft rules to remove/);
});

Deno.test("iptables-nft cleanup: a kube-proxy chain another rule reaches stays, with what it reaches", async () => {
  const tx = natTx();
  tx.add({ kind: "rule", chain: "FOREIGN", rule: `${C} jump KUBE-SVC-ABC` });
  const k = await kernel({ "ip nat": tx });
  const { lines, log } = capture();
  const report = await removeIptablesNft({ open: k.open, log, legacyTables: noLegacy });
  assert.deepEqual(report.failed, []);
  const nat = (await k.tables.get("ip nat")!.list())!;
  for (const c of ["KUBE-SVC-ABC", "KUBE-SEP-XYZ", "KUBE-MARK-MASQ"]) {
    assert.ok(nat.chains.has(c), c);
    assert.ok(nat.chains.get(c)!.rules.length > 0, `${c} keeps its rules`);
  }
  for (const c of ["KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-PROXY-CANARY"]) {
    assert.ok(!nat.chains.has(c), c);
  }
  assert.match(lines.join("\n"), /Leaving a kube-proxy iptables chain.*KUBE-SVC-ABC.*FOREIGN/);
});

Deno.test("iptables-nft cleanup: --dry-run lists and changes nothing", async () => {
  const k = await kernel({ "ip nat": natTx() });
  const { lines, log } = capture();
  const report = await removeIptablesNft({
    open: k.open,
    log,
    dryRun: true,
    legacyTables: noLegacy,
  });
  assert.equal(report.removed.length, 1);
  assert.ok((await k.tables.get("ip nat")!.list())!.chains.has("KUBE-SERVICES"));
  assert.match(lines.join("\n"), /Would remove kube-proxy's iptables-nft rules/);
});

Deno.test("iptables-nft cleanup: a failed transaction is retried on a fresh listing, then reported", async () => {
  const k = await kernel({ "ip nat": natTx() });
  const nat = k.tables.get("ip nat")!;
  let fails = 2;
  const open = (f: Family, t: IptTable) => {
    const c = k.open(f, t);
    if (f === "ip" && t === "nat") {
      c.run = (tx: Transaction) => fails-- > 0 ? Promise.reject(new Error("busy")) : nat.run(tx);
    }
    return c;
  };
  const { lines, log } = capture();
  const report = await removeIptablesNft({ open, log, legacyTables: noLegacy });
  assert.equal(report.failed.length, 1);
  assert.match(lines.join("\n"), /Cannot remove kube-proxy's iptables-nft rules/);
  fails = 1;
  const ok = await removeIptablesNft({ open, log, legacyTables: noLegacy });
  assert.deepEqual(ok.failed, []);
  assert.equal((await nat.list())!.chains.has("KUBE-SERVICES"), false);
});

Deno.test("iptables-nft cleanup: legacy tables are refused with the manual step; nft still cleaned", async () => {
  const k = await kernel({ "ip nat": natTx() });
  const { lines, log } = capture();
  const events: NodeEvent[] = [];
  const report = await removeIptablesNft({
    open: k.open,
    log,
    legacyTables: () => ({ ipv4: ["filter", "nat"], ipv6: [] }),
    event: (e) => events.push(e),
  });
  assert.deepEqual(report.legacy, { ipv4: ["filter", "nat"], ipv6: [] });
  const text = lines.join("\n");
  assert.match(text, /^E.*Not removing legacy iptables rules/m);
  assert.match(text, /ip_tables: filter,nat; ip6_tables: none/);
  assert.match(text, /iptables-legacy-save \| grep KUBE-/);
  assert.equal(events[0].reason, "LegacyIptables");
  assert.equal(events[0].type, "Warning");
  assert.equal((await k.tables.get("ip nat")!.list())!.chains.has("KUBE-SERVICES"), false);
});

Deno.test("legacy tables: read from /proc/net, a missing file is none", () => {
  const files: Record<string, string> = { "/proc/net/ip_tables_names": "nat\nfilter\n" };
  const read = (p: string) => {
    if (p in files) return files[p];
    throw new Deno.errors.NotFound(p);
  };
  assert.deepEqual(readLegacyTables(read), { ipv4: ["filter", "nat"], ipv6: [] });
  assert.match(legacyRefusal({ ipv4: [], ipv6: ["mangle"] }), /ip6_tables: mangle/);
});

Deno.test("afterFirstSync: fires once, when every family has committed", () => {
  let n = 0;
  const cb = afterFirstSync([4, 6], () => n++);
  cb(1, { 4: {} });
  assert.equal(n, 0, "IPv6 has not committed yet (preempted)");
  cb(2, { 6: {} });
  assert.equal(n, 1);
  cb(3, { 4: {}, 6: {} });
  assert.equal(n, 1);
});

Deno.test("planTable: no table, no plan; upstream's jumps only from their source chains", () => {
  assert.deepEqual(planTable("ip", "nat", null).chains, []);
  const chain = (name: string, rules: string[]) =>
    [name, {
      chain: { kind: "chain" as const, name },
      rules: rules.map((rule, i) => ({ kind: "rule" as const, chain: name, rule, handle: i + 10 })),
    }] as const;
  const state = {
    family: "ip" as const,
    name: "nat",
    chains: new Map([
      chain("PREROUTING", [`${C} jump KUBE-SERVICES`]),
      // Another program's chain reaching a kube-proxy chain through a verdict map.
      chain("MINE", ["tcp dport vmap { 80 : jump KUBE-NODEPORTS }"]),
      chain("KUBE-SERVICES", [`${C} jump KUBE-NODEPORTS`]),
      chain("KUBE-NODEPORTS", []),
    ]),
    sets: new Map(),
    maps: new Map(),
  };
  const p = planTable("ip", "nat", state);
  assert.deepEqual(p.jumps, [{ chain: "PREROUTING", handle: 10, target: "KUBE-SERVICES" }]);
  assert.deepEqual(p.chains, ["KUBE-SERVICES"]);
  assert.deepEqual(p.kept.map((k) => k.chain), ["KUBE-NODEPORTS"]);
  // The same jump from a chain upstream never links from is another program's.
  assert.equal(planTable("ip", "filter", { ...state, name: "filter" }).jumps.length, 0);
});

Deno.test("--cleanup-iptables-nft: off by default, a bool flag of ours", () => {
  assert.equal(parseArgs([]).cleanupIptablesNft, false);
  assert.equal(parseArgs(["--cleanup-iptables-nft"]).cleanupIptablesNft, true);
  assert.equal(parseArgs(["--cleanup-iptables-nft=false"]).cleanupIptablesNft, false);
  assert.ok(FLAGS.find((f) => f.name === "cleanup-iptables-nft")?.ours);
});
