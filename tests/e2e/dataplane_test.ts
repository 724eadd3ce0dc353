/**
 * Real traffic through rules a real proxier sync programs, in throwaway
 * network namespaces:
 *
 *   client (198.18.0.2) --eth0-- node (198.18.0.1, router, kube-proxy table)
 *                                 |-- vp1 -- pod1 198.18.1.11 / 2001:db8:1::11 (endpoint)
 *                                 |-- vp2 -- pod2 198.18.1.12 / 2001:db8:1::12 (endpoint)
 *                                 `-- vp3 -- pod3 198.18.1.13 / 2001:db8:1::13 (client pod)
 *
 * The node namespace is programmed by a child Deno process (fixture) that
 * runs one proxier sync through the libnftables FFI client.
 *
 * @module
 */
import { type IpFamily, nftFamily } from "../../net/family.ts";
import assert from "node:assert/strict";
import { denoBin, e2eTest, link, type Netns, repoRoot, withNetns } from "../netns.ts";
import type {
  EndpointInfo,
  ProxierConfig,
  ProxyState,
  ServicePortInfo,
} from "../../proxier/model.ts";
import { endpoint, servicePort } from "../../proxier/model_testing.ts";
import { parseTableListing } from "../../ffi/nftables/list_parser.ts";
import { GOLDEN } from "../golden_clusters.ts";
import { programFake } from "../programmed.ts";
import { replies, request } from "../topology.ts";
import { type Packet, trace } from "../../proxier/nftables/trace/tracer.ts";
import { tableReader } from "../../proxier/nftables/trace/reader.ts";

const FIX = `${repoRoot}/tests/e2e/fixtures`;
const NODE4 = "198.18.0.1", CLIENT4 = "198.18.0.2", NODE6 = "2001:db8::1";
const POD4 = ["198.18.1.11", "198.18.1.12", "198.18.1.13"];
const POD6 = ["2001:db8:1::11", "2001:db8:1::12", "2001:db8:1::13"];
const TCP_PORT = 8080, UDP_PORT = 5353;

const svc = (id: string, o: Partial<ServicePortInfo>) => servicePort(id, { family: 4, ...o });

const ep = (ip: string, port: number, isLocal = true) => endpoint(ip, port, { isLocal });

/** The cluster this test programs. */
function cluster(family: IpFamily): [ServicePortInfo, EndpointInfo[]][] {
  if (family === 6) {
    return [[
      svc("default/web6:http", { family: 6, clusterIP: "2001:db8:ffff::10" }),
      [ep(POD6[0], TCP_PORT), ep(POD6[1], TCP_PORT)],
    ]];
  }
  const both = (port: number) => [ep(POD4[0], port), ep(POD4[1], port)];
  return [
    [svc("default/web:http", { clusterIP: "198.19.0.10" }), both(TCP_PORT)],
    [
      svc("default/dns:dns", { clusterIP: "198.19.0.11", protocol: "UDP", port: 53 }),
      both(UDP_PORT),
    ],
    [svc("default/np:http", { clusterIP: "198.19.0.20", nodePort: 30080 }), [
      ep(POD4[0], TCP_PORT),
    ]],
    [
      svc("default/local:http", {
        clusterIP: "198.19.0.21",
        nodePort: 30081,
        externalPolicyLocal: true,
      }),
      [ep(POD4[0], TCP_PORT, true), ep(POD4[1], TCP_PORT, false)],
    ],
    [svc("default/empty:http", { clusterIP: "198.19.0.12", nodePort: 30082 }), []],
    [
      svc("default/sticky:http", { clusterIP: "198.19.0.13", stickyMaxAgeSeconds: 600 }),
      both(TCP_PORT),
    ],
  ];
}

function stateJSON(family: IpFamily): string {
  const svcs = cluster(family);
  const state: Omit<ProxyState, "services" | "endpoints"> & {
    services: [string, ServicePortInfo][];
    endpoints: [string, EndpointInfo[]][];
  } = {
    family,
    services: svcs.map(([s]) => [s.id, s]),
    endpoints: svcs.map(([s, e]) => [s.id, e]),
    node: {
      name: "node",
      labels: {},
      ips: [NODE4, NODE6],
      podCIDRs: ["198.18.1.0/24", "2001:db8:1::/64"],
    },
    serviceCIDRs: ["198.19.0.0/16", "2001:db8:ffff::/112"],
  };
  const config: ProxierConfig = {
    masqueradeAll: false,
    masqueradeBit: 14,
    localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.1.0/24", "2001:db8:1::/64"] },
    nodePortAddresses: ["primary"],
  };
  return JSON.stringify({ state, config });
}

async function firstLine(p: Deno.ChildProcess): Promise<string> {
  const reader = p.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  while (!buf.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
  }
  reader.releaseLock();
  return buf.trim();
}

async function setUp(node: Netns, client: Netns, pods: Netns[]): Promise<void> {
  await link(node, "eth0", client, "eth0");
  await node.exec(["ip", "addr", "add", `${NODE4}/24`, "dev", "eth0"]);
  await node.exec(["ip", "-6", "addr", "add", `${NODE6}/64`, "dev", "eth0", "nodad"]);
  await client.exec(["ip", "addr", "add", `${CLIENT4}/24`, "dev", "eth0"]);
  await client.exec(["ip", "-6", "addr", "add", "2001:db8::2/64", "dev", "eth0", "nodad"]);
  await client.exec(["ip", "route", "add", "default", "via", NODE4]);
  await client.exec(["ip", "-6", "route", "add", "default", "via", NODE6]);
  for (let i = 0; i < pods.length; i++) {
    const pod = pods[i], dev = `vp${i + 1}`;
    await link(node, dev, pod, "eth0");
    // Pods get /32 (/128) addresses and reach everything through the node.
    await node.exec(["ip", "addr", "add", `${NODE4}/32`, "dev", dev]);
    await node.exec(["ip", "-6", "addr", "add", `${NODE6}/128`, "dev", dev, "nodad"]);
    await node.exec(["ip", "route", "add", `${POD4[i]}/32`, "dev", dev]);
    await node.exec(["ip", "-6", "route", "add", `${POD6[i]}/128`, "dev", dev]);
    await pod.exec(["ip", "addr", "add", `${POD4[i]}/32`, "dev", "eth0"]);
    await pod.exec(["ip", "-6", "addr", "add", `${POD6[i]}/128`, "dev", "eth0", "nodad"]);
    await pod.exec(["ip", "route", "add", NODE4, "dev", "eth0"]);
    await pod.exec(["ip", "route", "add", "default", "via", NODE4, "dev", "eth0"]);
    await pod.exec(["ip", "-6", "route", "add", NODE6, "dev", "eth0"]);
    await pod.exec(["ip", "-6", "route", "add", "default", "via", NODE6, "dev", "eth0"]);
  }
  // Like a real node, the node has a default route (here: via the client), so a
  // packet to a ClusterIP that is not DNATed is forwarded and meets the filter
  // rules instead of failing routing with "network unreachable".
  await node.exec(["ip", "route", "add", "default", "via", CLIENT4]);
  await node.exec(["ip", "-6", "route", "add", "default", "via", "2001:db8::2"]);
  // Routing, and no ICMP rate limit (each REJECT sends one), only inside the node namespace.
  await node.exec(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
  await node.exec(["sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"]);
  await node.exec(["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"]);
}

async function program(node: Netns): Promise<void> {
  for (const family of [4, 6] as const) {
    const file = await Deno.makeTempFile({ prefix: `knp-dataplane-${family}-`, suffix: ".json" });
    try {
      await Deno.writeTextFile(file, stateJSON(family));
      const r = await node.exec([denoBin, "run", "-A", `${FIX}/dataplane_apply.ts`, file]);
      assert.match(r.stdout, /applied ip6? ruleset/);
    } finally {
      await Deno.remove(file);
    }
  }
}

/** What `kube-nft-proxy trace` predicts for a packet, run against the node's live ruleset. */
async function traced(
  node: Netns,
  from: string,
  to: string,
  iif?: string,
): Promise<{ verdict: string; endpoints: Set<string>; masquerade: boolean; reason: string }> {
  const args = ["trace", "--from", from, "--to", to, "-o", "json", ...(iif ? ["--iif", iif] : [])];
  const r = await node.exec([denoBin, "run", "-A", `${repoRoot}/main.ts`, ...args]);
  const res = JSON.parse(r.stdout);
  const label = (dnat: string) => {
    const ip = dnat.replace(/^\[?([^\]]+?)\]?:\d+$/, "$1");
    const i = [...POD4, ...POD6].indexOf(ip);
    return i < 0 ? ip : `pod${(i % 3) + 1}`;
  };
  return {
    verdict: res.verdict,
    endpoints: new Set(res.candidates.map((c: { dnat: string }) => label(c.dnat))),
    masquerade: res.masquerade,
    reason: res.reason,
  };
}

/** The namespaces a traffic step uses: the node, the off-cluster client and a client pod. */
interface Traffic {
  node: Netns;
  client: Netns;
  pod3: Netns;
}

/** The traffic steps, each real packets and the tracer's prediction for them. */
const TRAFFIC_STEPS: { name: string; run: (n: Traffic) => Promise<void> }[] = [
  {
    name: "ClusterIP TCP balances across endpoints",
    run: async ({ node, pod3 }) => {
      const rs = replies(await request(pod3, "tcp", "198.19.0.10", 80, 24));
      assert.deepEqual(new Set(rs.map(([l]) => l)), new Set(["pod1", "pod2"]));
      // Pod-to-service traffic is not masqueraded.
      for (const [, peer] of rs) assert.equal(peer, POD4[2]);
      const tr = await traced(node, POD4[2], "198.19.0.10:80/tcp", "vp3");
      assert.deepEqual(tr.endpoints, new Set(["pod1", "pod2"]), "trace agrees");
      assert.equal(tr.masquerade, false);
    },
  },
  {
    name: "ClusterIP from an off-cluster client is masqueraded",
    run: async ({ node, client }) => {
      const rs = replies(await request(client, "tcp", "198.19.0.10", 80, 4));
      for (const [, peer] of rs) assert.equal(peer, NODE4);
      assert.equal((await traced(node, CLIENT4, "198.19.0.10:80/tcp")).masquerade, true);
    },
  },
  {
    name: "ClusterIP UDP balances across endpoints",
    run: async ({ node, pod3 }) => {
      const rs = replies(await request(pod3, "udp", "198.19.0.11", 53, 24));
      assert.deepEqual(new Set(rs.map(([l]) => l)), new Set(["pod1", "pod2"]));
      const tr = await traced(node, POD4[2], "198.19.0.11:53/udp", "vp3");
      assert.deepEqual(tr.endpoints, new Set(["pod1", "pod2"]));
    },
  },
  {
    name: "NodePort from off-node client is masqueraded",
    run: async ({ node, client }) => {
      const rs = replies(await request(client, "tcp", NODE4, 30080, 3));
      for (const [label, peer] of rs) {
        assert.equal(label, "pod1");
        assert.equal(peer, NODE4);
      }
      const tr = await traced(node, CLIENT4, `${NODE4}:30080/tcp`);
      assert.deepEqual([tr.endpoints, tr.masquerade], [new Set(["pod1"]), true]);
    },
  },
  {
    name: "eTP=Local NodePort preserves the client IP and stays local",
    run: async ({ node, client }) => {
      const rs = replies(await request(client, "tcp", NODE4, 30081, 8));
      for (const [label, peer] of rs) {
        assert.equal(label, "pod1");
        assert.equal(peer, CLIENT4);
      }
      const tr = await traced(node, CLIENT4, `${NODE4}:30081/tcp`);
      assert.deepEqual([tr.endpoints, tr.masquerade], [new Set(["pod1"]), false]);
    },
  },
  {
    name: "no endpoints: connection refused at once, not a timeout",
    run: async ({ node, client, pod3 }) => {
      for (
        const [from, host, port] of [[pod3, "198.19.0.12", 80], [client, NODE4, 30082]] as const
      ) {
        const [r] = await request(from, "tcp", host, port, 1, 5000);
        assert.ok("error" in r, JSON.stringify(r));
        assert.equal(r.error, "ConnectionRefused", JSON.stringify(r));
        assert.ok(r.ms < 1000, `refused after ${r.ms} ms`);
      }
      const tr = await traced(node, POD4[2], "198.19.0.12:80/tcp", "vp3");
      assert.deepEqual([tr.verdict, tr.reason], ["REJECT", "the Service has no endpoints"]);
    },
  },
  {
    name: "undefined ClusterIP port is refused",
    run: async ({ node, pod3 }) => {
      const [r] = await request(pod3, "tcp", "198.19.0.10", 81, 1, 5000);
      assert.ok("error" in r && r.error === "ConnectionRefused", JSON.stringify(r));
      const tr = await traced(node, POD4[2], "198.19.0.10:81/tcp", "vp3");
      assert.deepEqual([tr.verdict, tr.reason], [
        "REJECT",
        "the ClusterIP has no such port and protocol",
      ]);
    },
  },
  {
    name: "ClientIP affinity sticks to one endpoint",
    run: async ({ client, pod3 }) => {
      const rs = replies(await request(pod3, "tcp", "198.19.0.13", 80, 12));
      assert.equal(new Set(rs.map(([l]) => l)).size, 1, JSON.stringify(rs));
      const rs2 = replies(await request(client, "tcp", "198.19.0.13", 80, 12));
      assert.equal(new Set(rs2.map(([l]) => l)).size, 1, JSON.stringify(rs2));
    },
  },
  {
    name: "IPv6 ClusterIP balances across endpoints",
    run: async ({ node, pod3 }) => {
      const rs = replies(await request(pod3, "tcp", "2001:db8:ffff::10", 80, 24));
      assert.deepEqual(new Set(rs.map(([l]) => l)), new Set(["pod1", "pod2"]));
      const tr = await traced(node, POD6[2], "[2001:db8:ffff::10]:80/tcp", "vp3");
      assert.deepEqual(tr.endpoints, new Set(["pod1", "pod2"]));
      for (const [, peer] of rs) assert.equal(peer, POD6[2]);
    },
  },
];

/** Starts the echo servers of pod1 and pod2 (TCP, UDP, and the IPv6 address). */
function startEchoes(pods: Netns[]): Deno.ChildProcess[] {
  return pods.map((pod, i) =>
    pod.spawn([
      denoBin,
      "run",
      "-A",
      `${FIX}/dataplane_echo.ts`,
      `pod${i + 1}`,
      String(TCP_PORT),
      String(UDP_PORT),
      POD6[i],
    ], { stderr: "inherit" })
  );
}

/** Stops the echo servers. */
async function stopEchoes(echoes: Deno.ChildProcess[]): Promise<void> {
  for (const e of echoes) {
    try {
      e.kill("SIGTERM");
    } catch { /* already gone */ }
    await e.status;
    await e.stdout.cancel().catch(() => {});
  }
}

e2eTest("dataplane: real traffic through built rules", async (t) => {
  await withNetns(5, async (node, client, pod1, pod2, pod3) => {
    await setUp(node, client, [pod1, pod2, pod3]);
    const echoes = startEchoes([pod1, pod2]);
    try {
      for (const e of echoes) assert.equal(await firstLine(e), "ready");
      await program(node);
      for (const step of TRAFFIC_STEPS) {
        await t.step(step.name, () => step.run({ node, client, pod3 }));
      }
    } finally {
      await stopEchoes(echoes);
    }
  });
});

/** Packets worth tracing for a cluster: every frontend from a pod, off-node and the node. */
function probePackets(st: ProxyState): Packet[] {
  const local = st.node.podCIDRs.find((c) => c.includes(st.family === 4 ? "." : ":"))!;
  const pod = st.family === 4
    ? local.replace(/\.0\/\d+$/, ".77")
    : local.replace(/::\/\d+$/, "::77");
  const off = st.family === 4 ? "198.18.60.6" : "2001:db8:60::6";
  const nodeIP = st.node.ips.find((a) => a.includes(st.family === 4 ? "." : ":"))!;
  const out: Packet[] = [];
  for (const s of st.services.values()) {
    const proto = s.protocol.toLowerCase() as Packet["proto"];
    for (const dst of [s.clusterIP, ...s.externalIPs, ...s.loadBalancerIPs]) {
      for (const [from, src] of [["pod", pod], ["offnode", off], ["host", nodeIP]] as const) {
        out.push({ from, src, dst, proto, dport: s.port });
        out.push({ from, src, dst, proto, dport: s.port + 1 });
      }
    }
    if (s.nodePort > 0) {
      out.push({ from: "offnode", src: off, dst: nodeIP, proto, dport: s.nodePort });
      out.push({ from: "pod", src: pod, dst: nodeIP, proto, dport: s.nodePort });
    }
  }
  return out;
}

e2eTest("dataplane: the kernel holds what the fake holds, traced packet by packet", async () => {
  await withNetns(1, async (ns) => {
    for (const [name, c] of Object.entries(GOLDEN)) {
      const family = nftFamily(c.state.family);
      // The golden file is the script a cold start sends; load it as nft would.
      const r = await ns.exec(["nft", "-f", `${repoRoot}/tests/golden/${name}.nft`], {
        check: false,
      });
      assert.equal(r.code, 0, `${name}: ${r.stderr}`);
      const listed = await ns.exec(["nft", "list", "table", family, "kube-proxy"]);
      const kernel = parseTableListing(listed.stdout, family, "kube-proxy")!;
      const fake = (await programFake(c.state, c.config)).fake.state()!;
      assert.deepEqual([...kernel.chains.keys()].sort(), [...fake.chains.keys()].sort(), name);
      const env = { nodeIPs: c.state.node.ips };
      for (const pkt of probePackets(c.state)) {
        const a = await trace(tableReader(kernel), pkt, env);
        const b = await trace(tableReader(fake), pkt, env);
        assert.deepEqual(
          { verdict: a.verdict, dnat: a.dnat, masquerade: a.masquerade },
          { verdict: b.verdict, dnat: b.dnat, masquerade: b.masquerade },
          `${name}: ${JSON.stringify(pkt)}`,
        );
      }
      await ns.exec(["nft", "delete", "table", family, "kube-proxy"]);
    }
  });
});
