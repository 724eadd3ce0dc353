/**
 * Behaviour of the built ruleset, checked by tracing packets through it.
 * Table-driven: one representative cluster, one case per behaviour.
 */
import assert from "node:assert/strict";
import type {
  EndpointInfo,
  NodeInfo,
  ProxierConfig,
  ProxyState,
  ServicePortInfo,
} from "../../model.ts";
import { buildContext } from "../context.ts";
import { type Packet, trace, type TraceResult } from "./tracer.ts";
import { tableReader } from "./reader.ts";
import { endpoint, servicePort } from "../../model_testing.ts";
import { programFake } from "../../../tests/programmed.ts";

const NODE_IP = "198.18.0.1";
const SECOND_NODE_IP = "198.18.0.99";
const CLIENT = "198.18.50.5"; // off-cluster
const POD = "198.18.129.10"; // pod on this node (podCIDR 198.18.129.0/24)
const EP_L1 = "198.18.129.11"; // local endpoints
const EP_L2 = "198.18.129.12";
const EP_R = "198.18.130.11"; // endpoint on another node

const svc = (id: string, o: Partial<ServicePortInfo>) => servicePort(id, { family: 4, ...o });

function ep(ip: string, o: Partial<EndpointInfo> = {}): EndpointInfo {
  const isLocal = ip.startsWith("198.18.129.") || ip.startsWith("2001:db8:129:");
  return endpoint(ip, 8080, { isLocal, ...o });
}

const SERVICES: [ServicePortInfo, EndpointInfo[]][] = [
  [svc("ns/cip:http", { clusterIP: "198.19.0.1" }), [ep(EP_L1), ep(EP_R)]],
  [svc("ns/udp:dns", { clusterIP: "198.19.0.2", protocol: "UDP", port: 53 }), [
    ep(EP_L1, { port: 5353 }),
  ]],
  [svc("ns/sctp:s", { clusterIP: "198.19.0.3", protocol: "SCTP", port: 9 }), [
    ep(EP_L2, { port: 9 }),
  ]],
  [
    svc("ns/np:http", { clusterIP: "198.19.0.4", nodePort: 30004, externalIPs: ["198.18.100.2"] }),
    [ep(EP_L1), ep(EP_R)],
  ],
  [
    svc("ns/lb:http", {
      clusterIP: "198.19.0.5",
      nodePort: 30005,
      loadBalancerIPs: ["198.18.100.1"],
      loadBalancerSourceRanges: ["198.18.50.0/24"],
    }),
    [ep(EP_L1)],
  ],
  [
    svc("ns/lbnode:http", {
      clusterIP: "198.19.0.6",
      loadBalancerIPs: ["198.18.100.3"],
      loadBalancerSourceRanges: ["198.18.0.0/24"],
    }),
    [ep(EP_L1)],
  ],
  [
    svc("ns/local:http", {
      clusterIP: "198.19.0.7",
      nodePort: 30007,
      externalIPs: ["198.18.100.7"],
      loadBalancerIPs: ["198.18.100.17"],
      externalPolicyLocal: true,
    }),
    [ep(EP_L1), ep(EP_R)],
  ],
  [
    svc("ns/localnone:http", {
      clusterIP: "198.19.0.8",
      nodePort: 30008,
      externalPolicyLocal: true,
    }),
    [ep(EP_R)],
  ],
  [svc("ns/itplocal:http", { clusterIP: "198.19.0.9", internalPolicyLocal: true }), [ep(EP_R)]],
  [
    svc("ns/noeps:http", {
      clusterIP: "198.19.0.10",
      nodePort: 30010,
      externalIPs: ["198.18.100.10"],
      loadBalancerIPs: ["198.18.100.11"],
    }),
    [],
  ],
  [svc("ns/sticky:http", { clusterIP: "198.19.0.11", stickyMaxAgeSeconds: 10800 }), [
    ep(EP_L1),
    ep(EP_R),
  ]],
  [svc("ns/term:http", { clusterIP: "198.19.0.12" }), [
    ep(EP_L1, { ready: false, serving: true, terminating: true }),
    ep(EP_R, { ready: false, serving: false, terminating: true }),
  ]],
  [svc("ns/topo:http", { clusterIP: "198.19.0.13" }), [
    ep(EP_L1, { zoneHints: ["zone-a"] }),
    ep(EP_R, { zoneHints: ["zone-b"] }),
  ]],
  [svc("ns/topon:http", { clusterIP: "198.19.0.14" }), [
    ep(EP_L1, { nodeHints: ["node1"] }),
    ep(EP_R, { nodeHints: ["node2"] }),
  ]],
  [svc("ns/itplocal-ok:http", { clusterIP: "198.19.0.15", internalPolicyLocal: true }), [
    ep(EP_L1),
    ep(EP_R),
  ]],
];

const NODE: NodeInfo = {
  name: "node1",
  labels: { "topology.kubernetes.io/zone": "zone-a" },
  ips: [NODE_IP, "2001:db8::1"],
  podCIDRs: ["198.18.129.0/24", "2001:db8:129::/64"],
};

const BASE_CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.128.0/17", "2001:db8:128::/47"] },
  nodePortAddresses: [],
};

function state4(): ProxyState {
  return {
    family: 4,
    services: new Map(SERVICES.map(([s]) => [s.id, s])),
    endpoints: new Map(SERVICES.map(([s, e]) => [s.id, e])),
    node: NODE,
    serviceCIDRs: ["198.19.0.0/16", "2001:db8:ffff::/112"],
  };
}

/** Programs the state through a real sync into MemoryNftables (which validates references) and traces the result. */
async function tracerFor(cfg: Partial<ProxierConfig> = {}, st: ProxyState = state4()) {
  const { fake } = await programFake(st, { ...BASE_CFG, ...cfg });
  const reader = tableReader(fake.state()!);
  const nodeIPs = st.family === 4 ? [NODE_IP, SECOND_NODE_IP] : ["2001:db8::1"];
  return (p: Packet): Promise<TraceResult> => trace(reader, p, { nodeIPs });
}

interface Case {
  name: string;
  cfg?: Partial<ProxierConfig>;
  pkt: Packet;
  verdict: TraceResult["verdict"];
  dnat?: string[];
  masq?: boolean;
}

const p = (
  from: Packet["from"],
  src: string,
  dst: string,
  dport: number,
  proto: Packet["proto"] = "tcp",
  iif?: string,
): Packet => ({ from, src, dst, dport, proto, ...(iif ? { iif } : {}) });

const L1 = `${EP_L1}:8080`, R = `${EP_R}:8080`;

const CASES: Case[] = [
  // ClusterIP, each protocol.
  {
    name: "ClusterIP TCP from pod",
    pkt: p("pod", POD, "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: false,
  },
  {
    name: "ClusterIP UDP",
    pkt: p("pod", POD, "198.19.0.2", 53, "udp"),
    verdict: "ACCEPT",
    dnat: [`${EP_L1}:5353`],
    masq: false,
  },
  {
    name: "ClusterIP SCTP",
    pkt: p("pod", POD, "198.19.0.3", 9, "sctp"),
    verdict: "ACCEPT",
    dnat: [`${EP_L2}:9`],
    masq: false,
  },
  {
    name: "ClusterIP wrong protocol is not captured -> REJECT",
    pkt: p("pod", POD, "198.19.0.2", 53, "tcp"),
    verdict: "REJECT",
    dnat: [],
  },
  {
    name: "ClusterIP from host masquerades",
    pkt: p("host", NODE_IP, "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  // Masquerade of off-cluster traffic, per detect-local mode.
  {
    name: "ClusterCIDR: off-cluster -> ClusterIP masquerades",
    pkt: p("offnode", CLIENT, "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  {
    name: "ClusterCIDR: remote pod is not masqueraded",
    pkt: p("offnode", "198.18.140.5", "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: false,
  },
  {
    name: "NodeCIDR: off-node pod masquerades",
    cfg: { localDetector: { mode: "NodeCIDR" } },
    pkt: p("offnode", "198.18.140.5", "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  {
    name: "NodeCIDR: local pod not masqueraded",
    cfg: { localDetector: { mode: "NodeCIDR" } },
    pkt: p("pod", POD, "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: false,
  },
  {
    name: "BridgeInterface: other iif masquerades",
    cfg: { localDetector: { mode: "BridgeInterface", interface: "cbr0" } },
    pkt: p("offnode", CLIENT, "198.19.0.1", 80, "tcp", "eth0"),
    verdict: "ACCEPT",
    masq: true,
  },
  {
    name: "BridgeInterface: bridge iif not masqueraded",
    cfg: { localDetector: { mode: "BridgeInterface", interface: "cbr0" } },
    pkt: p("pod", POD, "198.19.0.1", 80, "tcp", "cbr0"),
    verdict: "ACCEPT",
    masq: false,
  },
  {
    name: "InterfaceNamePrefix: other iif masquerades",
    cfg: { localDetector: { mode: "InterfaceNamePrefix", prefix: "veth" } },
    pkt: p("offnode", CLIENT, "198.19.0.1", 80, "tcp", "eth0"),
    verdict: "ACCEPT",
    masq: true,
  },
  {
    name: "InterfaceNamePrefix: veth iif not masqueraded",
    cfg: { localDetector: { mode: "InterfaceNamePrefix", prefix: "veth" } },
    pkt: p("pod", POD, "198.19.0.1", 80, "tcp", "veth12ab"),
    verdict: "ACCEPT",
    masq: false,
  },
  {
    name: "detect-local None: off-cluster not masqueraded",
    cfg: { localDetector: { mode: "None" } },
    pkt: p("offnode", CLIENT, "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: false,
  },
  {
    name: "masqueradeAll: pod traffic masqueraded",
    cfg: { masqueradeAll: true },
    pkt: p("pod", POD, "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  // Hairpin: a pod reaching itself is masqueraded on that path only.
  {
    name: "hairpin masquerades the self path",
    pkt: p("pod", EP_L1, "198.19.0.1", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  // NodePort / ExternalIP / LB with eTP=Cluster masquerade.
  {
    name: "NodePort eTP=Cluster masquerades",
    pkt: p("offnode", CLIENT, NODE_IP, 30004),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  {
    name: "NodePort on a non-nodePortAddresses IP is not captured",
    pkt: p("offnode", CLIENT, SECOND_NODE_IP, 30004),
    verdict: "ACCEPT",
    dnat: [],
  },
  {
    name: "ExternalIP eTP=Cluster masquerades",
    pkt: p("offnode", CLIENT, "198.18.100.2", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  {
    name: "LB allowed source masquerades",
    pkt: p("offnode", CLIENT, "198.18.100.1", 80),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: true,
  },
  {
    name: "LB source range drops others",
    pkt: p("offnode", "198.18.60.5", "198.18.100.1", 80),
    verdict: "DROP",
  },
  {
    name: "LB source range: LB IP as source dropped when no range covers the node",
    pkt: p("offnode", "198.18.100.1", "198.18.100.1", 80),
    verdict: "DROP",
  },
  {
    name: "LB range covering the node IP admits the LB IP as source",
    pkt: p("pod", "198.18.100.3", "198.18.100.3", 80),
    verdict: "ACCEPT",
    dnat: [L1],
  },
  {
    name: "LB range covering the node IP admits the node",
    pkt: p("host", NODE_IP, "198.18.100.3", 80),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: true,
  },
  {
    name: "LB IP in ipMode Proxy (absent from the model) is not captured",
    pkt: p("offnode", CLIENT, "198.18.100.99", 80),
    verdict: "ACCEPT",
    dnat: [],
    masq: false,
  },
  {
    name: "NodePort of LB service",
    pkt: p("offnode", CLIENT, NODE_IP, 30005),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: true,
  },
  // eTP=Local.
  {
    name: "eTP=Local NodePort: source preserved, local endpoints only",
    pkt: p("offnode", CLIENT, NODE_IP, 30007),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: false,
  },
  {
    name: "eTP=Local ExternalIP: source preserved",
    pkt: p("offnode", CLIENT, "198.18.100.7", 80),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: false,
  },
  {
    name: "eTP=Local LB: source preserved",
    pkt: p("offnode", CLIENT, "198.18.100.17", 80),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: false,
  },
  {
    name: "eTP=Local short-circuit for pods: all endpoints",
    pkt: p("pod", POD, "198.18.100.7", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: false,
  },
  {
    name: "eTP=Local short-circuit for host: all endpoints, masqueraded",
    pkt: p("host", NODE_IP, NODE_IP, 30007),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  {
    name: "eTP=Local ClusterIP still uses all endpoints",
    pkt: p("pod", POD, "198.19.0.7", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: false,
  },
  {
    name: "eTP=Local without local endpoints: NodePort DROP",
    pkt: p("offnode", CLIENT, NODE_IP, 30008),
    verdict: "DROP",
  },
  {
    name: "eTP=Local without local endpoints: pods still reach the NodePort",
    pkt: p("pod", POD, NODE_IP, 30008),
    verdict: "ACCEPT",
    dnat: [R],
    masq: false,
  },
  {
    name: "eTP=Local without local endpoints: host still reaches the NodePort",
    pkt: p("host", NODE_IP, NODE_IP, 30008),
    verdict: "ACCEPT",
    dnat: [R],
    masq: true,
  },
  {
    name: "iTP=Local: off-cluster traffic to the ClusterIP is masqueraded",
    pkt: p("offnode", CLIENT, "198.19.0.15", 80),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: true,
  },
  {
    name: "eTP=Local without local endpoints: ClusterIP works",
    pkt: p("pod", POD, "198.19.0.8", 80),
    verdict: "ACCEPT",
    dnat: [R],
  },
  {
    name: "iTP=Local without local endpoints: ClusterIP DROP",
    pkt: p("pod", POD, "198.19.0.9", 80),
    verdict: "DROP",
  },
  {
    name: "iTP=Local uses local endpoints only",
    pkt: p("pod", POD, "198.19.0.15", 80),
    verdict: "ACCEPT",
    dnat: [L1],
    masq: false,
  },
  // No endpoints -> REJECT for each kind.
  {
    name: "no endpoints: ClusterIP REJECT",
    pkt: p("pod", POD, "198.19.0.10", 80),
    verdict: "REJECT",
  },
  {
    name: "no endpoints: ClusterIP from host REJECT",
    pkt: p("host", NODE_IP, "198.19.0.10", 80),
    verdict: "REJECT",
  },
  {
    name: "no endpoints: NodePort REJECT",
    pkt: p("offnode", CLIENT, NODE_IP, 30010),
    verdict: "REJECT",
  },
  {
    name: "no endpoints: ExternalIP REJECT",
    pkt: p("offnode", CLIENT, "198.18.100.10", 80),
    verdict: "REJECT",
  },
  {
    name: "no endpoints: LB REJECT",
    pkt: p("offnode", CLIENT, "198.18.100.11", 80),
    verdict: "REJECT",
  },
  // Unknown ports and addresses in the service range.
  {
    name: "undefined ClusterIP port REJECT",
    pkt: p("pod", POD, "198.19.0.1", 81),
    verdict: "REJECT",
  },
  {
    name: "unallocated IP in ServiceCIDR DROP",
    pkt: p("pod", POD, "198.19.9.9", 80),
    verdict: "DROP",
  },
  {
    name: "unrelated destination untouched",
    pkt: p("pod", POD, "198.18.200.1", 80),
    verdict: "ACCEPT",
    dnat: [],
    masq: false,
  },
  // Endpoint selection.
  {
    name: "affinity service still balances new clients",
    pkt: p("pod", POD, "198.19.0.11", 80),
    verdict: "ACCEPT",
    dnat: [L1, R],
  },
  {
    name: "terminating fallback: serving+terminating only",
    pkt: p("pod", POD, "198.19.0.12", 80),
    verdict: "ACCEPT",
    dnat: [L1],
  },
  {
    name: "zone hints restrict to this zone",
    pkt: p("pod", POD, "198.19.0.13", 80),
    verdict: "ACCEPT",
    dnat: [L1],
  },
  {
    name: "node hints restrict to this node",
    pkt: p("pod", POD, "198.19.0.14", 80),
    verdict: "ACCEPT",
    dnat: [L1],
  },
  // nodePortAddresses.
  {
    name: "nodePortAddresses CIDR",
    cfg: { nodePortAddresses: ["198.18.0.0/24"] },
    pkt: p("offnode", CLIENT, NODE_IP, 30004),
    verdict: "ACCEPT",
    dnat: [L1, R],
  },
  {
    name: "nodePortAddresses CIDR excludes others",
    cfg: { nodePortAddresses: ["198.18.7.0/24"] },
    pkt: p("offnode", CLIENT, NODE_IP, 30004),
    verdict: "ACCEPT",
    dnat: [],
  },
  {
    name: "nodePortAddresses 0.0.0.0/0 uses every local address",
    cfg: { nodePortAddresses: ["0.0.0.0/0"] },
    pkt: p("offnode", CLIENT, SECOND_NODE_IP, 30004),
    verdict: "ACCEPT",
    dnat: [L1, R],
    masq: true,
  },
  {
    name: "nodePortAddresses 0.0.0.0/0, no endpoints REJECT",
    cfg: { nodePortAddresses: ["0.0.0.0/0"] },
    pkt: p("offnode", CLIENT, SECOND_NODE_IP, 30010),
    verdict: "REJECT",
  },
  {
    name: "NodePort on localhost is not supported",
    cfg: { nodePortAddresses: ["0.0.0.0/0"] },
    pkt: p("host", "127.0.0.1", "127.0.0.1", 30004),
    verdict: "ACCEPT",
    dnat: [],
  },
];

for (const c of CASES) {
  Deno.test(`trace: ${c.name}`, async () => {
    const r = await (await tracerFor(c.cfg))(c.pkt);
    assert.equal(r.verdict, c.verdict, JSON.stringify(r.branches));
    if (c.dnat !== undefined) assert.deepEqual(r.dnat, [...c.dnat].sort());
    if (c.masq !== undefined) assert.equal(r.masquerade, c.masq, JSON.stringify(r.branches));
  });
}

Deno.test("trace: hairpin masquerades only the path back to the sender", async () => {
  const r = await (await tracerFor())(p("pod", EP_L1, "198.19.0.1", 80));
  const byTarget = new Map(r.branches.map((b) => [b.dnat, b.masquerade]));
  assert.equal(byTarget.get(L1), true);
  assert.equal(byTarget.get(R), false);
});

Deno.test("trace: affinity rules come before the random choice and feed the sets", async () => {
  const { fake } = await programFake(state4(), BASE_CFG);
  const table = fake.state()!;
  const sets = [...table.sets.values()].filter((s) => s.set.name.includes("ns/sticky"));
  assert.equal(sets.length, 2);
  for (const { set: s } of sets) {
    assert.deepEqual(s.flags, ["dynamic", "timeout"]);
    assert.equal(s.timeout, 10800);
  }
  const chain = [...table.chains.values()].find((c) => c.chain.name.includes("ns/sticky/"))!;
  const rules = chain.rules.map((r) => r.rule);
  assert.match(
    rules[0],
    /^ip saddr @affinity-\S+ update @affinity-\S+ \{ ip saddr \} meta l4proto tcp dnat ip to /,
  );
  assert.match(rules[2], /numgen random mod 2 0 update @affinity-/);
  // A client already in an affinity set goes straight to its endpoint.
  const aff = [...table.sets.keys()].find((n) => n.includes("ns/sticky") && n.includes(EP_R))!;
  table.sets.get(aff)!.elements.push({ kind: "element", set: aff, key: [POD] });
  const r = await trace(tableReader(table), p("pod", POD, "198.19.0.11", 80), {
    nodeIPs: [NODE_IP],
  });
  assert.deepEqual(r.dnat, [R]);
});

Deno.test("trace: IPv6 ClusterIP and NodePort", async () => {
  const s6 = svc("ns/v6:http", {
    family: 6,
    clusterIP: "2001:db8:ffff::10",
    nodePort: 30600,
  });
  const st: ProxyState = {
    family: 6,
    services: new Map([[s6.id, s6]]),
    endpoints: new Map([[s6.id, [ep("2001:db8:129::11"), ep("2001:db8:130::11")]]]),
    node: NODE,
    serviceCIDRs: ["2001:db8:ffff::/112"],
  };
  const t = await tracerFor({}, st);
  const r = await t(p("pod", "2001:db8:129::10", "2001:db8:ffff::10", 80));
  assert.equal(r.verdict, "ACCEPT");
  assert.deepEqual(r.dnat, ["[2001:db8:129::11]:8080", "[2001:db8:130::11]:8080"]);
  assert.equal(r.masquerade, false);
  const np = await t(p("offnode", "2001:db8:50::5", "2001:db8::1", 30600));
  assert.equal(np.verdict, "ACCEPT");
  assert.equal(np.masquerade, true);
  assert.equal((await t(p("pod", "2001:db8:129::10", "2001:db8:ffff::99", 80))).verdict, "DROP");
  assert.equal((await t(p("pod", "2001:db8:129::10", "2001:db8:ffff::10", 81))).verdict, "REJECT");
});

Deno.test("trace: the rules serve no NodePorts on loopback, and say so", () => {
  const ctx = buildContext(state4(), { ...BASE_CFG, nodePortAddresses: ["127.0.0.0/8"] });
  assert.ok(ctx.warnings.some((w) => /do not serve NodePorts on loopback/.test(w)));
  assert.deepEqual(ctx.nodePortIPs, []);
});

Deno.test("tracer: unknown syntax throws instead of being ignored", async () => {
  const table = (await programFake(state4(), BASE_CFG)).fake.state()!;
  table.chains.get("services")!.rules.unshift({
    kind: "rule",
    chain: "services",
    rule: "tcp flags syn counter",
  });
  await assert.rejects(
    () => trace(tableReader(table), p("pod", POD, "198.19.0.1", 80), { nodeIPs: [NODE_IP] }),
    /cannot interpret/,
  );
});

Deno.test("trace: candidates carry their share; each path has steps and a reason", async () => {
  const t = await tracerFor();
  const r = await t(p("pod", POD, "198.19.0.1", 80));
  assert.deepEqual(r.candidates, [
    { dnat: L1, probability: 0.5, masquerade: false },
    { dnat: R, probability: 0.5, masquerade: false },
  ]);
  assert.match(r.reason, /^DNAT to endpoint /);
  const steps = r.branches[0].steps;
  assert.ok(
    steps.some((s) =>
      s.element?.startsWith("service-ips: 198.19.0.1 . tcp . 80 : goto dnat-tcp-2")
    ),
    JSON.stringify(steps),
  );
  assert.ok(steps.some((s) => s.element?.startsWith("endpoints-tcp: 198.19.0.1 . tcp . 80 . ")));
  // Own chains: one rule per endpoint, numgen mod (N-i) -> still 1/N each.
  const sticky = await t(p("pod", POD, "198.19.0.11", 80));
  assert.deepEqual(sticky.candidates.map((c) => c.probability), [0.5, 0.5]);
});

Deno.test("trace: reasons for refused packets", async () => {
  const t = await tracerFor();
  assert.equal((await t(p("pod", POD, "198.19.0.10", 80))).reason, "the Service has no endpoints");
  assert.equal(
    (await t(p("offnode", CLIENT, NODE_IP, 30008))).reason,
    "no endpoint this traffic may use (traffic policy Local, none on this node)",
  );
  assert.equal(
    (await t(p("pod", POD, "198.19.0.1", 81))).reason,
    "the ClusterIP has no such port and protocol",
  );
  assert.match((await t(p("pod", POD, "198.19.7.7", 80))).reason, /^unallocated ClusterIP/);
  assert.equal(
    (await t(p("offnode", "198.18.60.1", "198.18.100.1", 80))).reason,
    "source not in loadBalancerSourceRanges",
  );
  assert.match((await t(p("offnode", CLIENT, "198.18.200.1", 80))).reason, /^not translated/);
});
