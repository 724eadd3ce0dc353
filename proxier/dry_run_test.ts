import assert from "node:assert/strict";
import type { ProxyState, ServicePortInfo } from "./model.ts";
import { renderDryRun } from "./dry_run.ts";
import { buildRuleset } from "./rules.ts";
import { servicePort } from "./model_testing.ts";

const S: ServicePortInfo = servicePort("ns/web:http", {
  protocol: "UDP",
  clusterIP: "2001:db8:ffff::1",
  port: 53,
  nodePort: 30053,
});

Deno.test("dry run renders one nft script for the ip6 table", () => {
  const st: ProxyState = {
    family: 6,
    services: new Map([[S.id, S]]),
    endpoints: new Map([[S.id, [{
      ip: "2001:db8:1::5",
      port: 5353,
      ready: true,
      serving: true,
      terminating: false,
      isLocal: true,
    }]]]),
    node: { name: "n", labels: {}, ips: ["2001:db8::1"], podCIDRs: ["2001:db8:1::/64"] },
    serviceCIDRs: ["2001:db8:ffff::/112"],
  };
  const script = renderDryRun(buildRuleset(st, {
    masqueradeAll: false,
    masqueradeBit: 14,
    localDetector: { mode: "NodeCIDR" },
    nodePortAddresses: ["primary"],
  }));
  const lines = script.trimEnd().split("\n");
  assert.equal(lines[0], 'add table ip6 kube-proxy { comment "rules for kube-proxy" ; }');
  assert.equal(lines[1], "flush table ip6 kube-proxy");
  assert.ok(lines.every((l) => / ip6 kube-proxy /.test(l + " ")));
  assert.ok(
    lines.includes("add rule ip6 kube-proxy cluster-ips-check ip6 daddr 2001:db8:ffff::/112 drop"),
  );
  assert.ok(
    lines.includes(
      "add rule ip6 kube-proxy service-EK2SUCSI-ns/web/udp/http meta l4proto udp dnat ip6 to [2001:db8:1::5]:5353",
    ),
    script,
  );
  assert.ok(lines.includes("add element ip6 kube-proxy nodeport-ips { 2001:db8::1 }"));
  assert.ok(
    lines.includes(
      'add element ip6 kube-proxy service-nodeports { udp . 30053 comment "ns/web:http" : goto external-EK2SUCSI-ns/web/udp/http }',
    ),
  );
  // Elements of one set are folded into a single command.
  assert.equal(lines.filter((l) => l.startsWith("add element ip6 kube-proxy hairpin")).length, 1);
});
