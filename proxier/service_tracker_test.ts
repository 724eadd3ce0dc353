import assert from "node:assert/strict";
import type { V1Service } from "./k8s_types.ts";
import type { V1Service as ClientV1Service } from "@kubernetes/client-node";
import { ignoreReason, parseService, ServiceTracker } from "./service_tracker.ts";

/** Collects log lines so tests can assert on them. */
function captureLog() {
  const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const log = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => {
    lines.push({ level, msg, fields });
  };
  return { lines, log };
}

/** A ClusterIP Service with one TCP port 80 named "http"; `spec` overrides fields. */
function svc(
  name: string,
  spec: NonNullable<V1Service["spec"]> = {},
  extra: Partial<V1Service> = {},
): V1Service {
  return {
    metadata: { namespace: "ns", name, ...(extra.metadata ?? {}) },
    spec: {
      type: "ClusterIP",
      clusterIP: "198.18.100.1",
      clusterIPs: ["198.18.100.1"],
      ports: [{ name: "http", protocol: "TCP", port: 80 }],
      ...spec,
    },
    status: extra.status,
  };
}

Deno.test("client-node V1Service objects fit the structural type", () => {
  const fromClient: ClientV1Service = {
    metadata: { namespace: "ns", name: "a" },
    spec: { clusterIP: "198.18.0.1", ports: [{ port: 80, protocol: "TCP" }] },
  };
  const ours: V1Service = fromClient;
  assert.equal(parseService(ours).length, 1);
});

Deno.test("parseService: basic ClusterIP service", () => {
  const [p, ...rest] = parseService(svc("a"));
  assert.equal(rest.length, 0);
  assert.deepEqual(p, {
    id: "ns/a:http",
    namespace: "ns",
    name: "a",
    portName: "http",
    protocol: "TCP",
    family: 4,
    clusterIP: "198.18.100.1",
    port: 80,
    nodePort: 0,
    externalIPs: [],
    loadBalancerIPs: [],
    loadBalancerSourceRanges: [],
    stickyMaxAgeSeconds: 0,
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
  });
});

Deno.test("parseService: ignored services", () => {
  const cases: [string, V1Service, string][] = [
    ["headless clusterIP", svc("h", { clusterIP: "None", clusterIPs: ["None"] }), "headless"],
    ["headless clusterIP only", svc("h", { clusterIP: "None", clusterIPs: null }), "headless"],
    [
      "ExternalName",
      svc("e", { type: "ExternalName", clusterIP: undefined, clusterIPs: undefined }),
      "ExternalName",
    ],
    [
      "service-proxy-name",
      svc("p", {}, {
        metadata: { labels: { "service.kubernetes.io/service-proxy-name": "other" } },
      }),
      "service-proxy-name",
    ],
    ["no clusterIP", svc("n", { clusterIP: "", clusterIPs: [] }), "no clusterIP"],
  ];
  for (const [name, s, reason] of cases) {
    const { lines, log } = captureLog();
    assert.equal(ignoreReason(s), reason, name);
    assert.deepEqual(parseService(s, log), [], name);
    assert.equal(lines.length, 0, `${name}: ignoring is not an error`);
  }
});

Deno.test("parseService: dual-stack split by family", () => {
  const s = svc("d", {
    type: "LoadBalancer",
    clusterIP: "198.18.100.2",
    clusterIPs: ["198.18.100.2", "2001:db8::a"],
    ports: [
      { name: "dns", protocol: "UDP", port: 53, nodePort: 30053 },
      { name: "dns-tcp", protocol: "TCP", port: 53, nodePort: 30054 },
    ],
    externalIPs: ["198.18.200.1", "2001:DB8::E", "198.18.200.1"],
    loadBalancerSourceRanges: [" 198.18.0.0/16 ", "2001:db8::/32", "198.19.1.1/16"],
  }, {
    status: {
      loadBalancer: {
        ingress: [
          { ip: "198.18.250.1" },
          { ip: "2001:db8::fa", ipMode: "VIP" },
          { ip: "198.18.250.2", ipMode: "Proxy" },
          { hostname: "lb.example" },
        ],
      },
    },
  });
  const ports = parseService(s);
  assert.deepEqual(ports.map((p) => [p.id, p.family, p.clusterIP, p.protocol, p.nodePort]), [
    ["ns/d:dns", 4, "198.18.100.2", "UDP", 30053],
    ["ns/d:dns", 6, "2001:db8::a", "UDP", 30053],
    ["ns/d:dns-tcp", 4, "198.18.100.2", "TCP", 30054],
    ["ns/d:dns-tcp", 6, "2001:db8::a", "TCP", 30054],
  ]);
  const v4 = ports[0];
  const v6 = ports[1];
  assert.deepEqual(v4.externalIPs, ["198.18.200.1"]);
  assert.deepEqual(v6.externalIPs, ["2001:db8::e"]);
  assert.deepEqual(v4.loadBalancerIPs, ["198.18.250.1"]);
  assert.deepEqual(v6.loadBalancerIPs, ["2001:db8::fa"]);
  assert.deepEqual(v4.loadBalancerSourceRanges, ["198.18.0.0/16", "198.19.0.0/16"]);
  assert.deepEqual(v6.loadBalancerSourceRanges, ["2001:db8::/32"]);
});

Deno.test("parseService: IPv6-only service", () => {
  const ports = parseService(
    svc("six", { clusterIP: "2001:db8::10", clusterIPs: ["2001:db8::10"] }),
  );
  assert.deepEqual(ports.map((p) => [p.family, p.clusterIP]), [[6, "2001:db8::10"]]);
});

Deno.test("parseService: clusterIP without clusterIPs (older objects)", () => {
  const ports = parseService(svc("old", { clusterIP: "198.18.100.9", clusterIPs: undefined }));
  assert.deepEqual(ports.map((p) => p.clusterIP), ["198.18.100.9"]);
});

Deno.test("parseService: session affinity", () => {
  const cases: [NonNullable<V1Service["spec"]>, number][] = [
    [{ sessionAffinity: "None" }, 0],
    [{ sessionAffinity: "ClientIP" }, 10800],
    [
      { sessionAffinity: "ClientIP", sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } } },
      60,
    ],
    [{ sessionAffinity: "ClientIP", sessionAffinityConfig: { clientIP: {} } }, 10800],
  ];
  for (const [spec, want] of cases) {
    assert.equal(parseService(svc("s", spec))[0].stickyMaxAgeSeconds, want, JSON.stringify(spec));
  }
});

Deno.test("parseService: traffic policies and health check node port", () => {
  const cases: [string, NonNullable<V1Service["spec"]>, boolean, boolean, number][] = [
    [
      "ClusterIP eTP Local without externalIPs",
      { externalTrafficPolicy: "Local" },
      false,
      false,
      0,
    ],
    [
      "ClusterIP eTP Local with externalIPs",
      { externalTrafficPolicy: "Local", externalIPs: ["198.18.9.9"] },
      true,
      false,
      0,
    ],
    ["NodePort eTP Local", { type: "NodePort", externalTrafficPolicy: "Local" }, true, false, 0],
    [
      "LB eTP Local hcnp",
      { type: "LoadBalancer", externalTrafficPolicy: "Local", healthCheckNodePort: 32000 },
      true,
      false,
      32000,
    ],
    [
      "LB eTP Cluster keeps no hcnp",
      { type: "LoadBalancer", externalTrafficPolicy: "Cluster", healthCheckNodePort: 32000 },
      false,
      false,
      0,
    ],
    ["iTP Local", { internalTrafficPolicy: "Local" }, false, true, 0],
    ["iTP Cluster", { internalTrafficPolicy: "Cluster" }, false, false, 0],
  ];
  for (const [name, spec, ext, int, hc] of cases) {
    const [p] = parseService(svc("t", spec));
    assert.equal(p.externalPolicyLocal, ext, name);
    assert.equal(p.internalPolicyLocal, int, name);
    assert.equal(p.healthCheckNodePort, hc, name);
  }
});

Deno.test("parseService: bad port/protocol skip that port with one log line", () => {
  const cases: [
    string,
    NonNullable<NonNullable<V1Service["spec"]>["ports"]>[number],
    string,
    unknown,
  ][] = [
    ["port 0", { name: "bad", port: 0 }, "spec.ports[1].port", 0],
    ["port 70000", { name: "bad", port: 70000 }, "spec.ports[1].port", 70000],
    ["port missing", { name: "bad" }, "spec.ports[1].port", undefined],
    ["port fractional", { name: "bad", port: 80.5 }, "spec.ports[1].port", 80.5],
    ["protocol", { name: "bad", port: 81, protocol: "ICMP" }, "spec.ports[1].protocol", "ICMP"],
    ["nodePort", { name: "bad", port: 81, nodePort: 65536 }, "spec.ports[1].nodePort", 65536],
    ["nodePort negative", { name: "bad", port: 81, nodePort: -1 }, "spec.ports[1].nodePort", -1],
    ["duplicate name", { name: "http", port: 81 }, "spec.ports[1].name", "http"],
  ];
  for (const [name, bad, field, value] of cases) {
    const { lines, log } = captureLog();
    const ports = parseService(
      svc("bp", {
        ports: [{ name: "http", port: 80 }, bad, { name: "ok", port: 82, protocol: "SCTP" }],
      }),
      log,
    );
    assert.deepEqual(ports.map((p) => p.portName), ["http", "ok"], name);
    assert.equal(lines.length, 1, name);
    assert.equal(lines[0].level, "error");
    assert.equal(lines[0].fields?.service, "ns/bp", name);
    assert.equal(lines[0].fields?.field, field, name);
    assert.equal(lines[0].fields?.value, value, name);
    assert.match(lines[0].msg, /ns\/bp/);
    assert.match(lines[0].msg, /expected/);
  }
});

Deno.test("parseService: a bad clusterIP skips the whole service with one log line", () => {
  for (
    const spec of [
      { clusterIP: "198.18.0.300", clusterIPs: ["198.18.0.300"] },
      { clusterIP: "198.18.0.1", clusterIPs: ["198.18.0.1", "nope"] },
      { clusterIP: "198.18.0.1", clusterIPs: ["198.18.0.1", "198.18.0.2"] },
    ]
  ) {
    const { lines, log } = captureLog();
    assert.deepEqual(parseService(svc("bc", spec), log), [], JSON.stringify(spec));
    assert.equal(lines.length, 1);
    assert.match(lines[0].msg, /service ns\/bc: ignoring Service: spec\.clusterIPs\[\d\]/);
  }
});

Deno.test("parseService: bad externalIPs / LB IPs / source ranges drop just that value", () => {
  const { lines, log } = captureLog();
  const [p] = parseService(
    svc("bv", {
      externalIPs: ["198.18.5.5", "bogus", "198.18.5.6"],
      loadBalancerSourceRanges: ["198.18.0.0/16", "10.0.0.0/40", "x"],
    }, { status: { loadBalancer: { ingress: [{ ip: "1.2.3" }, { ip: "198.18.7.7" }] } } }),
    log,
  );
  assert.deepEqual(p.externalIPs, ["198.18.5.5", "198.18.5.6"]);
  assert.deepEqual(p.loadBalancerSourceRanges, ["198.18.0.0/16"]);
  assert.deepEqual(p.loadBalancerIPs, ["198.18.7.7"]);
  assert.deepEqual(lines.map((l) => [l.fields?.field, l.fields?.value]), [
    ["spec.externalIPs", "bogus"],
    ["status.loadBalancer.ingress[].ip", "1.2.3"],
    ["spec.loadBalancerSourceRanges", "10.0.0.0/40"],
    ["spec.loadBalancerSourceRanges", "x"],
  ]);
  for (const l of lines) assert.match(l.msg, /^service ns\/bv: ignoring/);
});

Deno.test("parseService: AllowServiceExternalIPs=false drops externalIPs as if unset", () => {
  const s = svc("e", { externalIPs: ["198.18.200.1"], externalTrafficPolicy: "Local" });
  const [on] = parseService(s);
  assert.deepEqual(on.externalIPs, ["198.18.200.1"]);
  assert.equal(on.externalPolicyLocal, true);
  const { lines, log } = captureLog();
  const [off] = parseService(s, log, { externalIPs: false });
  assert.deepEqual(off.externalIPs, []);
  // A ClusterIP Service with only externalIPs is no longer reachable from outside.
  assert.equal(off.externalPolicyLocal, false);
  assert.equal(off.clusterIP, "198.18.100.1");
  assert.deepEqual(lines, []);
  // Bad values are not even looked at.
  assert.deepEqual(
    parseService(svc("b", { externalIPs: ["x"] }), log, { externalIPs: false })[0]
      .externalIPs,
    [],
  );
  assert.deepEqual(lines, []);
});

Deno.test("ServiceTracker: the externalIPs option reaches every parse", () => {
  const t = new ServiceTracker(undefined, { externalIPs: false });
  t.update(null, svc("e", { externalIPs: ["198.18.200.1"] }));
  t.checkout();
  assert.deepEqual(t.ports("ns/e")[0].externalIPs, []);
});

Deno.test("parseService: missing metadata is logged, not thrown", () => {
  const { lines, log } = captureLog();
  assert.deepEqual(parseService({ spec: { clusterIP: "198.18.0.1" } }, log), []);
  assert.equal(lines.length, 1);
});

Deno.test("ServiceTracker: accumulates net changes between checkouts", () => {
  const t = new ServiceTracker(captureLog().log);
  const a1 = svc("a");
  const a2 = svc("a", { ports: [{ name: "http", port: 8080 }] });
  assert.equal(t.update(null, a1), true);
  assert.equal(t.pendingCount, 1);
  let ch = t.checkout();
  assert.equal(ch.size, 1);
  assert.deepEqual(ch.get("ns/a")!.previous, []);
  assert.equal(ch.get("ns/a")!.current[0].port, 80);
  assert.equal(t.pendingCount, 0);

  // No-op update (e.g. resync) is not a change.
  assert.equal(t.update(a1, structuredClone(a1)), false);
  assert.equal(t.pendingCount, 0);

  // Change then revert before the checkout: nothing pending.
  assert.equal(t.update(a1, a2), true);
  assert.equal(t.pendingCount, 1);
  assert.equal(t.update(a2, a1), true);
  assert.equal(t.pendingCount, 0);
  assert.equal(t.checkout().size, 0);

  // Update then delete: reported as previous -> [].
  t.update(a1, a2);
  t.update(a2, null);
  ch = t.checkout();
  assert.equal(ch.get("ns/a")!.previous[0].port, 80);
  assert.deepEqual(ch.get("ns/a")!.current, []);
  assert.deepEqual(t.ports("ns/a"), []);

  // A service becoming headless counts as deleted.
  t.update(null, a1);
  t.checkout();
  t.update(a1, svc("a", { clusterIP: "None", clusterIPs: ["None"] }));
  ch = t.checkout();
  assert.deepEqual(ch.get("ns/a")!.current, []);
});

Deno.test("ServiceTracker: a re-delivered version is not re-parsed or re-logged", () => {
  const { lines, log } = captureLog();
  const t = new ServiceTracker(log);
  const bad = svc("r", { ports: [{ name: "x", port: 0 }, { name: "y", port: 1 }] });
  bad.metadata!.resourceVersion = "7";
  t.update(null, bad);
  assert.equal(lines.length, 1);
  assert.equal(t.update(bad, structuredClone(bad)), false);
  assert.equal(lines.length, 1);
  const next = structuredClone(bad);
  next.metadata!.resourceVersion = "8";
  t.update(bad, next);
  assert.equal(lines.length, 2, "a new version is parsed (and logged) again");
});
