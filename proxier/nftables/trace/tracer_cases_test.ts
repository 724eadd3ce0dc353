/**
 * Behaviour of the built ruleset, checked by tracing packets through it: the table of cases,
 * one per behaviour, over the cluster in testdata/cluster.ts.
 */
import assert from "node:assert/strict";
import {
  type Case,
  CLIENT,
  EP_L1,
  EP_L2,
  L1,
  NODE_IP,
  p,
  POD,
  R,
  SECOND_NODE_IP,
  tracerFor,
} from "./testdata/cluster.ts";

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
