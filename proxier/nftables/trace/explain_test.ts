import assert from "node:assert/strict";
import type { ProxierConfig, ProxyState } from "../../model.ts";
import { endpoint, servicePort } from "../../model_testing.ts";
import { programFake } from "../../../tests/programmed.ts";
import { explain } from "./explain.ts";
import { tableReader } from "./reader.ts";
import { explainText, traceText } from "./report.ts";
import { trace } from "./tracer.ts";

const CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.128.0/17"] },
  nodePortAddresses: [],
};
const ENV = { nodeIPs: ["198.18.0.1"], podIP: "198.18.129.50", outsideIP: "198.18.60.6" };

async function reader() {
  const web = servicePort("ns/web:http", {
    clusterIP: "198.19.0.20",
    nodePort: 30080,
    loadBalancerIPs: ["198.18.100.1"],
    loadBalancerSourceRanges: ["198.18.60.0/24"],
  });
  const local = servicePort("ns/local:http", {
    clusterIP: "198.19.0.21",
    nodePort: 30081,
    externalPolicyLocal: true,
  });
  const st: ProxyState = {
    family: 4,
    services: new Map([[web.id, web], [local.id, local]]),
    endpoints: new Map([
      [web.id, [endpoint("198.18.129.5", 8080, { isLocal: true }), endpoint("198.18.130.5", 8080)]],
      [local.id, [endpoint("198.18.130.6", 8080, { nodeName: "other" })]],
    ]),
    node: { name: "n1", labels: {}, ips: ["198.18.0.1"], podCIDRs: ["198.18.129.0/24"] },
    serviceCIDRs: ["198.19.0.0/16"],
  };
  return tableReader((await programFake(st, CFG)).fake.state()!);
}

Deno.test("explain: every frontend, its elements and chains, and who reaches which endpoint", async () => {
  const e = await explain(await reader(), "ns/web", ENV);
  assert.equal(e.ports.length, 1);
  const fs = e.ports[0].frontends;
  assert.deepEqual(fs.map((f) => [f.kind, f.key]), [
    ["ClusterIP", "198.19.0.20 . tcp . 80"],
    ["ExternalIP/LoadBalancer", "198.18.100.1 . tcp . 80"],
    ["NodePort", "tcp . 30080"],
  ]);
  const cip = fs[0];
  assert.deepEqual(cip.chains, ["dnat-tcp-2"]);
  const fromPod = cip.reach.find((r) => r.source === "pod")!;
  assert.deepEqual(fromPod.endpoints.map((c) => [c.dnat, c.probability, c.masquerade]), [
    ["198.18.129.5:8080", 0.5, false],
    ["198.18.130.5:8080", 0.5, false],
  ]);
  const lb = fs[1];
  assert.deepEqual(lb.sourceRanges, ["198.18.60.0/24"]);
  const np = fs[2].reach.find((r) => r.source === "offnode")!;
  assert.ok(np.endpoints.every((c) => c.masquerade), "NodePort traffic is masqueraded");
  const txt = explainText(e);
  assert.match(txt, /port ns\/web:http/);
  assert.match(txt, /from outside\s+ACCEPT\s+198\.18\.129\.5:8080 50%/);
});

Deno.test("explain: eTP=Local without local endpoints drops outside clients only", async () => {
  const e = await explain(await reader(), "ns/local", ENV);
  const np = e.ports[0].frontends.find((f) => f.kind === "NodePort")!;
  const by = Object.fromEntries(np.reach.map((r) => [r.source, r]));
  assert.equal(by.offnode.verdict, "DROP");
  assert.match(by.offnode.reason, /traffic policy Local/);
  assert.equal(by.pod.verdict, "ACCEPT");
  assert.match(explainText(await explain(await reader(), "ns/none", ENV)), /nothing programmed/);
  const r = await reader();
  await assert.rejects(() => explain(r, "bad", ENV), /NAMESPACE\/SERVICE/);
});

Deno.test("trace text names the steps, the verdict and each candidate's share", async () => {
  const pkt = {
    from: "offnode" as const,
    src: "198.18.60.6",
    dst: "198.18.0.1",
    proto: "tcp" as const,
    dport: 30080,
  };
  const txt = traceText(pkt, await trace(await reader(), pkt, ENV));
  assert.match(
    txt,
    /-> frontends-nodeport-dnat-tcp-2: tcp \. 30080 \(ns\/web:http\)/,
  );
  assert.match(txt, /verdict: ACCEPT: DNAT/);
  assert.match(txt, /198\.18\.130\.5:8080\s+50%\s+masqueraded/);
});
