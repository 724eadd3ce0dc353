/**
 * --cleanup-iptables-nft, inner half: runs INSIDE the node namespace of a {@link Topology} built
 * by tests/e2e/iptables_nft_test.ts (env KNP_TOPO; pods 0 and 1 run echo servers "a" and "b").
 *
 * kube-proxy's iptables mode, as `iptables-save` shows it, is written here with the
 * iptables-nft and ip6tables-nft binaries: the jump rules in the base chains, KUBE-SERVICES,
 * a KUBE-SVC-/KUBE-SEP- pair DNATing `web` to pod "a" only, a two-endpoint service `web2`
 * (statistic match), KUBE-POSTROUTING's masquerade, the filter chains, the canaries, plus the
 * kubelet's KUBE-FIREWALL and KUBE-KUBELET-CANARY and another program's chain and rules, which
 * must all survive. The agent's own Service `web` has both pods, so a reply from "b" shows the
 * agent's rules serve; `web2` is not in the API, so it stops answering once kube-proxy's rules
 * are gone. Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { run } from "../netns.ts";
import type { ProbeResult } from "../topology.ts";
import { AgentProcess, httpGet } from "./fixtures/agent_process.ts";
import { type AgentUnderTest, startAgent } from "./fixtures/agent_under_test.ts";
import {
  attachTopology,
  fails,
  metric,
  node,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/iptables_nft_test.ts");
const A4 = topo.podIPv4(0), B4 = topo.podIPv4(1);
const A6 = topo.podIPv6(0), B6 = topo.podIPv6(1);
const WEB4 = "198.19.0.10", WEB2_4 = "198.19.0.11";
const WEB6 = "2001:db8:ffff::10", WEB2_6 = "2001:db8:ffff::11";

/** An upstream-looking chain name: prefix and 16 base32-ish characters. */
const chain = (prefix: string, tag: string) => `KUBE-${prefix}-${tag.padEnd(16, "Q")}`;
const SVC = chain("SVC", "WEB"), SEP = chain("SEP", "WEBA");
const SVC2 = chain("SVC", "WEBTWO"),
  SEP2A = chain("SEP", "WEBTWOA"),
  SEP2B = chain("SEP", "WEBTWOB");

interface Fam {
  v6: boolean;
  web: string;
  web2: string;
  a: string;
  b: string;
  pods: string;
  foreign: string;
}
const V4: Fam = {
  v6: false,
  web: WEB4,
  web2: WEB2_4,
  a: A4,
  b: B4,
  pods: "198.18.1.0/24",
  foreign: "198.18.99.0/24",
};
const V6: Fam = {
  v6: true,
  web: WEB6,
  web2: WEB2_6,
  a: A6,
  b: B6,
  pods: "2001:db8:1::/64",
  foreign: "2001:db8:99::/64",
};

/** `ip:port` as iptables' DNAT takes it. */
const hostPort = (f: Fam, ip: string) => (f.v6 ? `[${ip}]:8080` : `${ip}:8080`);
const host = (f: Fam, ip: string) => (f.v6 ? `${ip}/128` : `${ip}/32`);

/** kube-proxy's filter table for one family: its chains, jumps and KUBE-FORWARD rules. */
function filterRules(f: Fam): string[] {
  const ct = "-m conntrack --ctstate NEW -m comment --comment";
  const firewall = f.v6 ? [] : [
    `-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming ` +
    `localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
  ];
  return [
    "*filter",
    ...[
      "KUBE-EXTERNAL-SERVICES",
      "KUBE-FORWARD",
      "KUBE-NODEPORTS",
      "KUBE-PROXY-CANARY",
      "KUBE-PROXY-FIREWALL",
      "KUBE-SERVICES",
      "KUBE-FIREWALL",
      "KUBE-KUBELET-CANARY",
    ].map((c) => `:${c} - [0:0]`),
    `-A INPUT ${ct} "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
    `-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`,
    `-A INPUT ${ct} "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
    "-A INPUT -j KUBE-FIREWALL",
    `-A INPUT -p tcp -m tcp --dport 2222 -m comment --comment "someone else's" -j ACCEPT`,
    `-A FORWARD ${ct} "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
    `-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`,
    `-A FORWARD ${ct} "kubernetes service portals" -j KUBE-SERVICES`,
    `-A FORWARD ${ct} "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
    `-A OUTPUT ${ct} "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
    `-A OUTPUT ${ct} "kubernetes service portals" -j KUBE-SERVICES`,
    "-A OUTPUT -j KUBE-FIREWALL",
    ...firewall,
    "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP",
    `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark ` +
    "0x4000/0x4000 -j ACCEPT",
    `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack ` +
    "--ctstate RELATED,ESTABLISHED -j ACCEPT",
    "COMMIT",
  ];
}

/** kube-proxy's nat table for one family: web (one endpoint), web2 (two) and a foreign SNAT. */
function natRules(f: Fam): string[] {
  return [
    "*nat",
    ...[
      "KUBE-SERVICES",
      "KUBE-NODEPORTS",
      "KUBE-POSTROUTING",
      "KUBE-MARK-MASQ",
      "KUBE-PROXY-CANARY",
      "KUBE-KUBELET-CANARY",
      SVC,
      SEP,
      SVC2,
      SEP2A,
      SEP2B,
      "FOREIGN-SNAT",
    ].map((c) => `:${c} - [0:0]`),
    `-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
    `-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
    `-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`,
    `-A POSTROUTING -s ${f.foreign} -j FOREIGN-SNAT`,
    "-A FOREIGN-SNAT -j MASQUERADE",
    "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000",
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
    "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000",
    `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" ` +
    "-j MASQUERADE --random-fully",
    `-A KUBE-SERVICES -d ${host(f, f.web)} -p tcp -m comment --comment "default/web:p cluster ` +
    `IP" -m tcp --dport 80 -j ${SVC}`,
    `-A KUBE-SERVICES -d ${host(f, f.web2)} -p tcp -m comment --comment "default/web2:p ` +
    `cluster IP" -m tcp --dport 80 -j ${SVC2}`,
    `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be ` +
    `the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
    `-A ${SVC} ! -s ${f.pods} -d ${host(f, f.web)} -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ`,
    `-A ${SVC} -m comment --comment "default/web:p -> ${hostPort(f, f.a)}" -j ${SEP}`,
    `-A ${SEP} -s ${host(f, f.a)} -m comment --comment "default/web:p" -j KUBE-MARK-MASQ`,
    `-A ${SEP} -p tcp -m comment --comment "default/web:p" -m tcp -j DNAT --to-destination ` +
    hostPort(f, f.a),
    `-A ${SVC2} -m statistic --mode random --probability 0.50000000000 -j ${SEP2A}`,
    `-A ${SVC2} -j ${SEP2B}`,
    `-A ${SEP2A} -p tcp -m tcp -j DNAT --to-destination ${hostPort(f, f.a)}`,
    `-A ${SEP2B} -p tcp -m tcp -j DNAT --to-destination ${hostPort(f, f.b)}`,
    "COMMIT",
  ];
}

/** kube-proxy's iptables-mode tables for one family (iptables-restore --noflush input). */
function rules(f: Fam): string {
  return [
    "*mangle",
    ":KUBE-PROXY-CANARY - [0:0]",
    ":KUBE-KUBELET-CANARY - [0:0]",
    "COMMIT",
    ...filterRules(f),
    ...natRules(f),
    "",
  ].join("\n");
}

/** kube-proxy's chains in the listings: none may be left. */
const KUBE_PROXY_CHAIN =
  /KUBE-(SERVICES|NODEPORTS|POSTROUTING|MARK-MASQ|PROXY-CANARY|PROXY-FIREWALL|EXTERNAL-SERVICES|FORWARD|SVC-|SEP-)/;

/** `iptables-nft-save` (or ip6tables-nft-save) of this namespace. */
async function save(f: Fam): Promise<string> {
  return (await run([f.v6 ? "ip6tables-nft-save" : "iptables-nft-save"])).stdout;
}

/** What must survive: the kubelet's chains, the foreign chain and rules. */
function assertForeignKept(f: Fam, text: string): void {
  for (
    const line of [
      ":KUBE-KUBELET-CANARY",
      ":KUBE-FIREWALL",
      "-A INPUT -j KUBE-FIREWALL",
      "-A OUTPUT -j KUBE-FIREWALL",
      ":FOREIGN-SNAT",
      `-A POSTROUTING -s ${f.foreign} -j FOREIGN-SNAT`,
      "-A FOREIGN-SNAT -j MASQUERADE",
      "--dport 2222",
    ]
  ) assert.ok(text.includes(line), `${line} is gone:\n${text}`);
}

/** Probes both families' `web` until `stop`; every result. */
async function probeLoop(stop: { done: boolean }): Promise<ProbeResult[]> {
  const out: ProbeResult[] = [];
  while (!stop.done) {
    for (const ip of [WEB4, WEB6]) {
      out.push(...await topo.request(topo.client, "tcp", ip, 80, 3, 2000));
    }
  }
  return out;
}

/** Starts the agent while probing both families: its cleanup must not fail one request. */
async function cleanupUnderTraffic(sut: AgentUnderTest): Promise<void> {
  const stop = { done: false };
  const probes = probeLoop(stop);
  const agent = sut.start();
  await sut.healthy();
  await agent.waitForLine(/iptables-nft cleanup done/, 30_000);
  await new Promise((r) => setTimeout(r, 1000));
  stop.done = true;
  const results = await probes;
  const failed = results.filter((r) => "error" in r);
  const seen = new Set(results.map((r) => ("reply" in r ? r.reply.split(" ")[0] : "-")));
  console.log(`during: ${results.length} requests, replies from ${[...seen].sort()}`);
  assert.ok(results.length >= 6, `too few probes: ${results.length}`);
  assert.deepEqual(failed, [], `${failed.length} of ${results.length} requests failed`);
}

/** The agent's rules serve, kube-proxy's are gone, the foreign ones kept; log, metrics, Event. */
async function assertCleanedUp(sut: AgentUnderTest): Promise<void> {
  for (const f of [V4, V6]) {
    await reaches(topo, "tcp", f.web, 80, ["a", "b"]);
    await fails(topo, f.web2, 80);
    const text = await save(f);
    const left = text.split("\n").filter((l) => KUBE_PROXY_CHAIN.test(l));
    assert.deepEqual(left, [], `kube-proxy's rules left:\n${text}`);
    assertForeignKept(f, text);
  }
  const a = sut.agent;
  const log = a.text();
  for (const table of ["ip nat", "ip filter", "ip mangle", "ip6 nat", "ip6 filter"]) {
    assert.match(log, new RegExp(`Removed kube-proxy's iptables-nft rules.*"${table}"`));
  }
  assert.match(log, /PREROUTING->KUBE-SERVICES#\d+/);
  assert.doesNotMatch(log, /Not removing legacy iptables rules/);
  const m = await httpGet(`${sut.metrics}/metrics`);
  const name = "kube_nft_proxy_iptables_nft_removed_total";
  for (const fam of ["IPv4", "IPv6"]) {
    // nat 3 + filter 9 jumps; nat 10 + filter 6 + mangle 1 chains.
    assert.equal(metric(m.body, name, `ip_family="${fam}",kind="rule"`), 12, m.body);
    assert.equal(metric(m.body, name, `ip_family="${fam}",kind="chain"`), 17, m.body);
  }
  assert.ok(
    sut.api.events.some((e) => e.reason === "IptablesNftCleanup" && e.type === "Normal"),
    JSON.stringify(sut.api.events),
  );
}

/** Legacy iptables KUBE- chains: the agent refuses them with the manual step and serves. */
async function legacyRefused(sut: AgentUnderTest): Promise<void> {
  await run(["iptables-legacy", "-t", "filter", "-N", "KUBE-SERVICES"]);
  await run(["ip6tables-legacy", "-t", "filter", "-N", "KUBE-SERVICES"]);
  try {
    const agent = await sut.restart();
    await sut.healthy();
    const line = await agent.waitForLine(/Not removing legacy iptables rules/, 30_000);
    assert.match(line.text, /^E/, "an error line");
    assert.match(line.text, /ip_tables: filter; ip6_tables: filter/);
    assert.match(line.text, /iptables-legacy-save \| grep KUBE-/);
    assert.match(line.text, /kube-proxy --cleanup --proxy-mode=iptables/);
    await reaches(topo, "tcp", WEB4, 80, ["a", "b"]);
    await reaches(topo, "tcp", WEB6, 80, ["a", "b"]);
    assert.ok(
      sut.api.events.some((e) => e.reason === "LegacyIptables" && e.type === "Warning"),
      JSON.stringify(sut.api.events),
    );
    const st = await agent.stop();
    assert.equal(st.code, 0, agent.tail());
  } finally {
    await run(["iptables-legacy", "-t", "filter", "-X", "KUBE-SERVICES"], { check: false });
    await run(["ip6tables-legacy", "-t", "filter", "-X", "KUBE-SERVICES"], { check: false });
  }
}

/** The agent of the latest start, or undefined before the first. */
function latest(sut: AgentUnderTest): AgentProcess | undefined {
  try {
    return sut.agent;
  } catch {
    return undefined;
  }
}

Deno.test({
  name: "--cleanup-iptables-nft: iptables-nft rules go after the first sync, traffic throughout",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    await run(["iptables-nft-restore", "--noflush"], { stdin: rules(V4) });
    await run(["ip6tables-nft-restore", "--noflush"], { stdin: rules(V6) });
    const sut = startAgent({
      objects: [
        node(),
        serviceCIDR(),
        service("web", { ip: WEB4 }),
        slice("web", [A4, B4]),
        service("web6", { ip: WEB6 }),
        slice("web6", [A6, B6]),
      ],
      args: ["--cleanup-iptables-nft", "--v=2"],
      deferStart: true,
    });
    try {
      await t.step("before: kube-proxy's iptables-nft rules serve", async () => {
        for (const f of [V4, V6]) {
          await reaches(topo, "tcp", f.web, 80, ["a"]);
          await reaches(topo, "tcp", f.web2, 80, ["a", "b"]);
          assert.match(await save(f), /KUBE-SEP-/);
        }
      });

      await t.step(
        "during: the agent starts and cleans up; no request fails",
        () => cleanupUnderTraffic(sut),
      );

      await t.step(
        "after: the agent's rules serve; kube-proxy's are gone",
        () => assertCleanedUp(sut),
      );

      await t.step("a restart finds nothing to remove and serves", async () => {
        const agent = await sut.restart();
        await sut.healthy();
        await agent.waitForLine(/No kube-proxy iptables-nft rules to remove/, 30_000);
        await reaches(topo, "tcp", WEB4, 80, ["a", "b"]);
        await reaches(topo, "tcp", WEB6, 80, ["a", "b"]);
      });

      await t.step(
        "legacy iptables: refused with the manual step; the agent serves",
        () => legacyRefused(sut),
      );
    } finally {
      await latest(sut)?.stop("SIGKILL").catch(() => {});
      await AgentProcess.run(["--cleanup"]).catch(() => {});
      await sut.close();
    }
  },
});
