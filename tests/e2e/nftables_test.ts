/**
 * Real-kernel tests of the libnftables client. Each test makes a fresh
 * network namespace and runs tests/e2e/fixtures/nft_client.ts inside it; the
 * fixture prints JSON that is checked here, and `nft` (inside the namespace
 * only) cross-checks what the kernel holds.
 *
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, type Netns, repoRoot, withNetns } from "../netns.ts";

const fixture = `${repoRoot}/tests/e2e/fixtures/nft_client.ts`;

// deno-lint-ignore no-explicit-any
type Json = any;

async function scenario(ns: Netns, name: string, ...args: string[]): Promise<Json> {
  const res = await ns.exec([denoBin, "run", "-A", fixture, name, ...args], { check: false });
  if (res.code !== 0) throw new Error(`fixture ${name} failed (${res.code}):\n${res.stderr}`);
  return JSON.parse(res.stdout.trim().split("\n").at(-1)!);
}

function keys(elements: Json[]): string[] {
  return elements.map((e) => e.key.join(" . ")).sort();
}

function byKey(elements: Json[], key: string): Json {
  const el = elements.find((e) => e.key.join(" . ") === key);
  assert.ok(el, `element ${key} not listed`);
  return el;
}

/** The names and types one family's expectations use. */
interface Fam {
  /** The test's i-th address. */
  a: (i: number) => string;
  /** nft address type. */
  at: string;
  /** nft address selector prefix. */
  ipk: string;
  family: "ip" | "ip6";
}

function famOf(family: "ip" | "ip6"): Fam {
  return {
    a: (i) => family === "ip6" ? `2001:db8::${(i + 1).toString(16)}` : `198.18.0.${i + 1}`,
    at: family === "ip6" ? "ipv6_addr" : "ipv4_addr",
    ipk: family === "ip6" ? "ip6" : "ip",
    family,
  };
}

/** Chains: base chains with type/hook/priority/policy, regular chains, comments. */
function checkChains(out: Json, s: Json): void {
  assert.deepEqual(Object.keys(s.chains).sort(), [
    "endpoint-1",
    "endpoint-2",
    "filter-output",
    "mark-for-masquerade",
    "nat-prerouting",
    "service-ABCD-ns1/svc1/tcp/p80",
    "services",
  ]);
  assert.deepEqual(out.chains.slice().sort(), Object.keys(s.chains).sort());
  assert.deepEqual(s.chains["nat-prerouting"].chain, {
    kind: "chain",
    name: "nat-prerouting",
    type: "nat",
    hook: "prerouting",
    priority: -100,
    policy: "accept",
  });
  assert.deepEqual(s.chains["filter-output"].chain, {
    kind: "chain",
    name: "filter-output",
    type: "filter",
    hook: "output",
    priority: -110,
    policy: "accept",
    comment: "pre-dnat filter",
  });
  assert.deepEqual(s.chains["services"].chain, { kind: "chain", name: "services" });
  assert.equal(s.chains["service-ABCD-ns1/svc1/tcp/p80"].chain.comment, "ns1/svc1:p80");
}

/** Rules: bodies, jump/goto, comments split off, handles present. */
function checkRules(s: Json, { a, ipk, family }: Fam): void {
  const rules = (c: string) => s.chains[c].rules.map((r: Json) => r.rule);
  assert.deepEqual(rules("nat-prerouting"), ["jump services"]);
  assert.deepEqual(rules("services"), [`${ipk} daddr . meta l4proto . th dport vmap @service-ips`]);
  const svcRule = s.chains["service-ABCD-ns1/svc1/tcp/p80"].rules[0];
  assert.equal(
    svcRule.rule,
    "numgen random mod 2 vmap { 0 : goto endpoint-1, 1 : goto endpoint-2 }",
  );
  assert.equal(svcRule.comment, "balance");
  assert.deepEqual(rules("endpoint-1"), [
    `${ipk} saddr ${a(10)} jump mark-for-masquerade`,
    `update @affinity-1 { ${ipk} saddr }`,
    family === "ip6"
      ? `meta l4proto tcp dnat to [${a(10)}]:8080`
      : `meta l4proto tcp dnat to ${a(10)}:8080`,
  ]);
  assert.deepEqual(rules("endpoint-2"), ["goto mark-for-masquerade"]);
  // The kernel normalises some bodies: this is the listed form, documented in client.ts.
  assert.deepEqual(rules("mark-for-masquerade"), ["meta mark set meta mark | 0x00004000"]);
  for (const c of Object.values(s.chains) as Json[]) {
    for (const r of c.rules) assert.ok(Number.isInteger(r.handle) && r.handle > 0, "rule handle");
  }
}

/** Sets: types, flags, timeouts, elements and their comments. */
function checkSets(s: Json, { a, at, family }: Fam): void {
  assert.deepEqual(s.sets["cluster-ips"].set, {
    kind: "set",
    name: "cluster-ips",
    type: at,
    comment: "active ClusterIPs",
  });
  assert.deepEqual(keys(s.sets["cluster-ips"].elements), [a(1), a(2)].sort());
  assert.equal(byKey(s.sets["cluster-ips"].elements, a(1)).comment, "ns1/svc1");
  assert.equal(byKey(s.sets["cluster-ips"].elements, a(2)).comment, undefined);
  assert.deepEqual(s.sets["service-cidrs"].set.flags, ["interval"]);
  assert.deepEqual(keys(s.sets["service-cidrs"].elements), [
    family === "ip6" ? "2001:db8:1::/48" : "198.18.128.0/17",
  ]);
  assert.deepEqual(s.sets["affinity-1"].set, {
    kind: "set",
    name: "affinity-1",
    type: at,
    flags: ["dynamic", "timeout"],
    timeout: 10800,
  });
  assert.deepEqual(s.sets["affinity-1"].elements, []);
}

/** Maps: a concatenated verdict map and a data map with a concatenated value. */
function checkMaps(s: Json, { a, at }: Fam): void {
  assert.deepEqual(s.maps["service-ips"].map, {
    kind: "map",
    name: "service-ips",
    type: `${at} . inet_proto . inet_service`,
    dataType: "verdict",
    comment: "ClusterIP dispatch",
  });
  const svcIps = s.maps["service-ips"].elements;
  assert.deepEqual(keys(svcIps), [`${a(1)} . tcp . 80`, `${a(2)} . udp . 53`].sort());
  assert.deepEqual(byKey(svcIps, `${a(1)} . tcp . 80`), {
    kind: "element",
    map: "service-ips",
    key: [a(1), "tcp", "80"],
    value: ["goto service-ABCD-ns1/svc1/tcp/p80"],
    comment: "ns1/svc1:p80",
  });
  assert.equal(byKey(svcIps, `${a(2)} . udp . 53`).comment, undefined);
  assert.deepEqual(s.maps["backends"].map, {
    kind: "map",
    name: "backends",
    type: at,
    dataType: `${at} . inet_service`,
  });
  assert.deepEqual(s.maps["backends"].elements, [
    { kind: "element", map: "backends", key: [a(1)], value: [a(10), "8080"] },
  ]);
}

function checkApplied(out: Json, family: "ip" | "ip6"): void {
  const f = famOf(family);
  assert.equal(out.before, null, "table must not exist before");
  assert.deepEqual(out.chainsBefore, []);
  assert.equal(out.afterCheck, null, "check() (dry run) must not create anything");
  const s = out.state;
  assert.equal(s.family, family);
  assert.equal(s.name, "knp-test");
  assert.equal(s.comment, "rules for kube-nft-proxy tests");
  checkChains(out, s);
  checkRules(s, f);
  checkSets(s, f);
  checkMaps(s, f);
  // listElements agrees with list().
  assert.deepEqual(out.serviceIps, s.maps["service-ips"].elements);
  assert.deepEqual(out.clusterIps, s.sets["cluster-ips"].elements);
  assert.equal(out.missingSet.notFound, true);
}

e2eTest("nftables: an ip transaction applies and lists back field by field", async () => {
  await withNetns(1, async (ns) => {
    const out = await scenario(ns, "apply", "ip");
    checkApplied(out, "ip");
    const ruleset = (await ns.exec(["nft", "list", "ruleset"])).stdout;
    assert.match(ruleset, /table ip knp-test/);
    assert.match(ruleset, /198\.18\.0\.2 \. tcp \. 80 comment "ns1\/svc1:p80" : goto service-ABCD/);
  });
});

e2eTest("nftables: an ip6 transaction applies and lists back field by field", async () => {
  await withNetns(1, async (ns) => {
    checkApplied(await scenario(ns, "apply", "ip6"), "ip6");
    const ruleset = (await ns.exec(["nft", "list", "ruleset"])).stdout;
    assert.match(ruleset, /table ip6 knp-test/);
    assert.doesNotMatch(ruleset, /table ip knp-test/);
  });
});

e2eTest(
  "nftables: a failing transaction applies nothing and names the failed command",
  async () => {
    await withNetns(1, async (ns) => {
      const out = await scenario(ns, "failure", "ip");
      for (const err of [out.checkError, out.runError]) {
        assert.equal(err.failedOperation, 4);
        assert.equal(err.failedCommand, "add rule ip knp-test a jump no-such-chain");
        assert.equal(err.notFound, true);
        assert.match(err.message, /No such file or directory/);
      }
      assert.equal(out.afterRun, null, "nothing of the failed batch may be applied");
      // Third element of a folded element line.
      assert.equal(out.elementError.failedOperation, 5);
      assert.equal(
        out.elementError.failedCommand,
        "add element ip knp-test m { 198.18.1.3 . tcp . 80 : goto no-such-chain }",
      );
      assert.equal(out.afterElement, null);
      assert.equal(out.syntaxError.failedOperation, 2);
      assert.match(out.syntaxError.message, /syntax error/);
      assert.equal(out.existsError.failedOperation, 1);
      assert.equal(out.existsError.exists, true);
      assert.deepEqual(Object.keys(out.afterExists.chains), ["dupe"], "chain 'ok' must not exist");
      assert.equal(out.emptyRun, "ok");
      // The fixture deleted its table at the end; nothing else was ever applied.
      const ruleset = (await ns.exec(["nft", "list", "ruleset"])).stdout;
      assert.equal(ruleset.trim(), "");
    });
  },
);

e2eTest("nftables: the failed element is found inside a 30k-element command", async () => {
  await withNetns(1, async (ns) => {
    // libnftables 1.0.6 misplaces the caret in very long element lines: the
    // client must confirm its guess with dry runs and bisect when it is wrong.
    const out = await scenario(ns, "failure-large", "ip", "30000");
    assert.equal(out.err.failedOperation, out.expected);
    assert.match(out.err.failedCommand, /: goto no-such-chain \}$/);
    assert.equal(out.after, null);
  });
});

e2eTest("nftables: replace and delete rules by handle, delete elements, flush", async () => {
  await withNetns(1, async (ns) => {
    const out = await scenario(ns, "modify", "ip");
    const rules = (s: Json, c: string) => s.chains[c].rules;
    const initial = rules(out.initial, "c");
    assert.equal(initial.length, 3);
    const edited = rules(out.edited, "c");
    assert.deepEqual(edited.map((r: Json) => r.rule), [
      "ip daddr 198.18.0.2 accept",
      "ip daddr 198.18.0.3 jump d",
    ]);
    assert.equal(edited[0].handle, initial[1].handle, "replace keeps the handle");
    assert.deepEqual(keys(out.edited.maps.m.elements), ["198.18.0.2", "198.18.0.3"]);
    assert.deepEqual(keys(out.edited.sets.s.elements), ["198.18.0.7"]);
    assert.equal(out.missingHandle.notFound, true);
    assert.equal(out.missingHandle.failedOperation, 0);
    assert.equal(out.missingElement.notFound, true);
    assert.deepEqual(out.flushed.chains.c.rules, []);
    assert.equal(out.flushed.chains.d.rules.length, 1);
    assert.deepEqual(out.flushed.maps.m.elements, []);
    assert.deepEqual(keys(out.flushed.sets.s.elements), ["198.18.0.7"]);
    const listed = (await ns.exec(["nft", "list", "table", "ip", "knp-test"])).stdout;
    assert.match(listed, /chain c \{\s*\}/);
  });
});

e2eTest("nftables: run does not block the event loop; calls are serialised", async () => {
  await withNetns(1, async (ns) => {
    const out = await scenario(ns, "nonblocking", "ip", "50000");
    assert.equal(out.listedCount, 50000, "a list queued behind the run sees all of it");
    assert.equal(out.checked, "ok");
    assert.equal(out.ran, "ok");
    assert.deepEqual(out.chains.slice().sort(), ["from-run", "svc"], "only run() commits");
    // A 5 ms interval must keep firing while libnftables works on its thread.
    const expected = out.ms / 5;
    assert.ok(out.ms > 50, `transaction too small to tell (${out.ms} ms)`);
    assert.ok(
      out.ticksDuringRun >= expected * 0.5,
      `only ${out.ticksDuringRun} ticks in ${out.ms.toFixed(0)} ms`,
    );
    const count = await ns.exec([
      "sh",
      "-c",
      "nft list map ip knp-test m | grep -o 'goto svc' | wc -l",
    ]);
    assert.equal(Number(count.stdout.trim()), 50000);
  });
});
