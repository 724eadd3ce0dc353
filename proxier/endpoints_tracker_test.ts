import assert from "node:assert/strict";
import type { Endpoint, EndpointPort, EndpointSlice } from "./k8s_types.ts";
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { EndpointsTracker, parseEndpointSlice, portKey } from "./endpoints_tracker.ts";

function captureLog() {
  const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const log = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => {
    lines.push({ level, msg, fields });
  };
  return { lines, log };
}

/** An IPv4 slice of Service ns/`service` with port "http"/TCP/8080 unless given. */
function slice(
  name: string,
  service: string,
  endpoints: Endpoint[],
  ports: EndpointPort[] = [{ name: "http", protocol: "TCP", port: 8080 }],
  addressType = "IPv4",
): EndpointSlice {
  return {
    metadata: { namespace: "ns", name, labels: { "kubernetes.io/service-name": service } },
    addressType,
    endpoints,
    ports,
  };
}

const ep = (ip: string, extra: Partial<Endpoint> = {}): Endpoint => ({ addresses: [ip], ...extra });
const HTTP4 = portKey(4, "http", "TCP");

Deno.test("client-node V1EndpointSlice objects fit the structural type", () => {
  const fromClient: V1EndpointSlice = {
    addressType: "IPv4",
    metadata: { namespace: "ns", name: "s", labels: { "kubernetes.io/service-name": "a" } },
    endpoints: [{ addresses: ["198.18.1.1"], conditions: { ready: true } }],
    ports: [{ name: "", port: 80, protocol: "TCP" }],
  };
  const ours: EndpointSlice = fromClient;
  assert.equal(parseEndpointSlice(ours, "n1")?.ports[0].endpoints.length, 1);
});

Deno.test("parseEndpointSlice: conditions, locality, zone and hints", () => {
  const cases: [string, Endpoint, Record<string, unknown>][] = [
    ["all nil", ep("198.18.1.1"), { ready: true, serving: true, terminating: false }],
    // endpointslicecache.go reads a nil serving as true, whatever ready says.
    ["not ready, serving nil", ep("198.18.1.1", { conditions: { ready: false } }), {
      ready: false,
      serving: true,
      terminating: false,
    }],
    [
      "terminating, serving nil",
      ep("198.18.1.1", { conditions: { ready: false, terminating: true } }),
      { ready: false, serving: true, terminating: true },
    ],
    [
      "terminating and serving",
      ep("198.18.1.1", { conditions: { ready: false, serving: true, terminating: true } }),
      { ready: false, serving: true, terminating: true },
    ],
    ["local", ep("198.18.1.1", { nodeName: "me" }), { isLocal: true, nodeName: "me" }],
    ["remote", ep("198.18.1.1", { nodeName: "other" }), { isLocal: false, nodeName: "other" }],
    [
      "zone and hints",
      ep("198.18.1.1", {
        zone: "z1",
        hints: { forZones: [{ name: "z2" }, { name: "z1" }], forNodes: [{ name: "me" }] },
      }),
      { zone: "z1", zoneHints: ["z1", "z2"], nodeHints: ["me"] },
    ],
    ["empty hints omitted", ep("198.18.1.1", { hints: { forZones: [] } }), {
      zoneHints: undefined,
    }],
  ];
  for (const [name, e, want] of cases) {
    const p = parseEndpointSlice(slice("s", "a", [e]), "me")!;
    const info = p.ports[0].endpoints[0] as unknown as Record<string, unknown>;
    for (const [k, v] of Object.entries(want)) assert.deepEqual(info[k], v, `${name}: ${k}`);
  }
});

Deno.test("parseEndpointSlice: FQDN/headless/foreign ignored silently; unknown type, missing label logged", () => {
  let c = captureLog();
  assert.equal(
    parseEndpointSlice(slice("f", "a", [ep("db.example")], undefined, "FQDN"), "me", c.log),
    null,
  );
  assert.equal(c.lines.length, 0);
  for (
    const label of ["service.kubernetes.io/headless", "service.kubernetes.io/service-proxy-name"]
  ) {
    const s = slice("h", "a", [ep("198.18.1.1")]);
    s.metadata!.labels![label] = "";
    assert.equal(parseEndpointSlice(s, "me", c.log), null, label);
  }
  assert.equal(c.lines.length, 0);
  c = captureLog();
  assert.equal(parseEndpointSlice(slice("x", "a", [], undefined, "IPv5"), "me", c.log), null);
  assert.equal(c.lines.length, 1);
  assert.match(c.lines[0].msg, /ns\/x.*addressType.*IPv5/);
  c = captureLog();
  const unlabelled = slice("u", "a", []);
  unlabelled.metadata!.labels = {};
  assert.equal(parseEndpointSlice(unlabelled, "me", c.log), null);
  assert.equal(c.lines.length, 1);
  assert.match(c.lines[0].msg, /kubernetes\.io\/service-name/);
});

Deno.test("parseEndpointSlice: bad endpoints and ports skipped with one log line each", () => {
  const cases: [string, Endpoint[], EndpointPort[], string, string[], string[]][] = [
    [
      "bad IP",
      [ep("198.18.1.1"), ep("198.18.1.300"), ep("198.18.1.2")],
      [{ name: "http", port: 8080 }],
      "endpoints[1].addresses[0]",
      ["198.18.1.1", "198.18.1.2"],
      ["http"],
    ],
    [
      "wrong family",
      [ep("2001:db8::1"), ep("198.18.1.2")],
      [{ name: "http", port: 8080 }],
      "endpoints[0].addresses[0]",
      ["198.18.1.2"],
      ["http"],
    ],
    [
      "no address",
      [{ addresses: [] }, ep("198.18.1.2")],
      [{ name: "http", port: 8080 }],
      "endpoints[0].addresses[0]",
      ["198.18.1.2"],
      ["http"],
    ],
    [
      "bad port",
      [ep("198.18.1.1")],
      [{ name: "http", port: 8080 }, { name: "x", port: 0 }],
      "ports[1].port",
      ["198.18.1.1"],
      ["http"],
    ],
    [
      "nil port (all ports) unsupported",
      [ep("198.18.1.1")],
      [{ name: "http", port: 8080 }, { name: "x", port: null }],
      "ports[1].port",
      ["198.18.1.1"],
      ["http"],
    ],
    [
      "bad protocol",
      [ep("198.18.1.1")],
      [{ name: "x", port: 1, protocol: "GRE" }, { name: "http", port: 8080 }],
      "ports[0].protocol",
      ["198.18.1.1"],
      ["http"],
    ],
  ];
  for (const [name, eps, ports, field, ips, portNames] of cases) {
    const { lines, log } = captureLog();
    const p = parseEndpointSlice(slice("b", "a", eps, ports), "me", log)!;
    assert.deepEqual(p.ports[0].endpoints.map((e) => e.ip), ips, name);
    assert.deepEqual(p.ports.map((e) => e.key), portNames.map((n) => portKey(4, n, "TCP")), name);
    assert.equal(lines.length, 1, name);
    assert.equal(lines[0].fields?.endpointSlice, "ns/b", name);
    assert.equal(lines[0].fields?.field, field, name);
    assert.match(lines[0].msg, /^endpointslice ns\/b: ignoring .* expected /, name);
  }
});

Deno.test("EndpointsTracker: several slices merged per port, sorted", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  t.update(null, slice("a-1", "a", [ep("198.18.1.10"), ep("198.18.1.9")]));
  t.update(null, slice("a-2", "a", [ep("198.18.1.1", { nodeName: "me" })]));
  assert.equal(t.pendingCount, 2);
  const ch = t.checkout();
  assert.equal(t.pendingCount, 0);
  const eps = ch.get("ns/a")!.current.get(HTTP4)!;
  assert.deepEqual(eps.map((e) => [e.ip, e.port, e.isLocal]), [
    ["198.18.1.1", 8080, true],
    ["198.18.1.9", 8080, false],
    ["198.18.1.10", 8080, false],
  ]);
  assert.deepEqual(t.endpoints("ns/a").get(HTTP4), eps);
});

Deno.test("EndpointsTracker: slice ports matched by name and protocol; per-slice port numbers", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  t.update(
    null,
    slice("a-1", "a", [ep("198.18.1.1")], [{ name: "http", protocol: "TCP", port: 8080 }]),
  );
  // Same name, other target port (named targetPort resolving differently).
  t.update(
    null,
    slice("a-2", "a", [ep("198.18.1.2")], [{ name: "http", protocol: "TCP", port: 9090 }]),
  );
  // Same name, other protocol: a different service port key.
  t.update(
    null,
    slice("a-3", "a", [ep("198.18.1.3")], [{ name: "http", protocol: "UDP", port: 8080 }]),
  );
  // Unnamed port.
  t.update(null, slice("a-4", "a", [ep("198.18.1.4")], [{ port: 7070 }]));
  const cur = t.checkout().get("ns/a")!.current;
  assert.deepEqual(cur.get(HTTP4)!.map((e) => `${e.ip}:${e.port}`), [
    "198.18.1.1:8080",
    "198.18.1.2:9090",
  ]);
  assert.deepEqual(cur.get(portKey(4, "http", "UDP"))!.map((e) => `${e.ip}:${e.port}`), [
    "198.18.1.3:8080",
  ]);
  assert.deepEqual(cur.get(portKey(4, "", "TCP"))!.map((e) => `${e.ip}:${e.port}`), [
    "198.18.1.4:7070",
  ]);
});

Deno.test("EndpointsTracker: duplicate endpoints across slices: freshest wins, non-terminating preferred", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  const notReady = ep("198.18.1.1", { conditions: { ready: false } });
  const ready = ep("198.18.1.1", { conditions: { ready: true } });
  t.update(null, slice("a-1", "a", [notReady]));
  t.update(null, slice("a-2", "a", [ready]));
  let eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
  assert.equal(eps.length, 1);
  assert.equal(eps[0].ready, true, "a-2 is fresher");

  // a-1 updated later (still holding the stale copy): now a-1 is freshest.
  t.update(null, slice("a-1", "a", [notReady, ep("198.18.1.2")]));
  eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
  assert.deepEqual(eps.map((e) => [e.ip, e.ready]), [["198.18.1.1", false], ["198.18.1.2", true]]);

  // A terminating copy never replaces a non-terminating one (IP reuse).
  const term = ep("198.18.1.2", { conditions: { ready: false, serving: true, terminating: true } });
  t.update(null, slice("a-3", "a", [term]));
  eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
  assert.deepEqual(eps.map((e) => [e.ip, e.terminating]), [["198.18.1.1", false], [
    "198.18.1.2",
    false,
  ]]);

  // Once the endpoint moved fully, the old slice drops it.
  t.update(null, slice("a-1", "a", [notReady]));
  eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
  assert.deepEqual(eps.map((e) => [e.ip, e.terminating]), [["198.18.1.1", false], [
    "198.18.1.2",
    true,
  ]]);
});

Deno.test("EndpointsTracker: IPv6 slices and FQDN slices", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  t.update(null, slice("a-v6", "a", [ep("2001:DB8::0:1")], undefined, "IPv6"));
  t.update(null, slice("a-fqdn", "a", [ep("x.example")], undefined, "FQDN"));
  const cur = t.checkout().get("ns/a")!.current;
  assert.deepEqual([...cur.keys()], [portKey(6, "http", "TCP")]);
  assert.deepEqual(cur.get(portKey(6, "http", "TCP"))!.map((e) => e.ip), ["2001:db8::1"]);
});

Deno.test("EndpointsTracker: change bookkeeping (no-op, delete, re-label, unusable update)", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  const s1 = slice("a-1", "a", [ep("198.18.1.1")]);
  assert.equal(t.update(null, s1), true);
  t.checkout();
  // Resync with identical content.
  assert.equal(t.update(s1, structuredClone(s1)), false);
  assert.equal(t.pendingCount, 0);
  // Same slice updated twice: one pending slice.
  t.update(s1, slice("a-1", "a", [ep("198.18.1.2")]));
  t.update(s1, slice("a-1", "a", [ep("198.18.1.3")]));
  assert.equal(t.pendingCount, 1);
  let ch = t.checkout();
  assert.deepEqual(ch.get("ns/a")!.current.get(HTTP4)!.map((e) => e.ip), ["198.18.1.3"]);

  // Re-labelled to another service: leaves a, joins b.
  const s3 = slice("a-1", "a", [ep("198.18.1.3")]);
  t.update(s3, slice("a-1", "b", [ep("198.18.1.3")]));
  ch = t.checkout();
  assert.equal(ch.get("ns/a")!.current.size, 0);
  assert.equal(ch.get("ns/b")!.current.get(HTTP4)!.length, 1);

  // Updated to an unusable version (FQDN): the old copy is forgotten.
  const b1 = slice("a-1", "b", [ep("198.18.1.3")]);
  assert.equal(t.update(b1, slice("a-1", "b", [ep("x.example")], undefined, "FQDN")), true);
  ch = t.checkout();
  assert.equal(ch.get("ns/b")!.current.size, 0);

  // Delete of an unknown slice changes nothing.
  assert.equal(t.update(slice("zz", "c", []), null), false);
  assert.equal(t.checkout().size, 0);
});

Deno.test("EndpointsTracker: a Service going from one slice to two and back keeps the right endpoints", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  const ips = () => [...t.endpoints("ns/a").get(HTTP4) ?? []].map((e) => e.ip);
  const a1 = slice("a-1", "a", [ep("198.18.1.1")]);
  const a2 = slice("a-2", "a", [ep("198.18.1.2")]);
  t.update(null, a1);
  t.checkout();
  t.update(null, a2);
  assert.deepEqual([...t.checkout().keys()], ["ns/a"]);
  assert.deepEqual(ips(), ["198.18.1.1", "198.18.1.2"]);
  assert.equal(t.update(a1, null), true);
  assert.deepEqual(t.checkout().get("ns/a")!.current.get(HTTP4)!.map((e) => e.ip), [
    "198.18.1.2",
  ]);
  // The remaining slice, now stored alone, still updates and deletes by name.
  assert.equal(t.update(a1, null), false, "a-1 is already gone");
  t.update(a2, slice("a-2", "a", [ep("198.18.1.3")]));
  assert.deepEqual(t.checkout().get("ns/a")!.current.get(HTTP4)!.map((e) => e.ip), [
    "198.18.1.3",
  ]);
  assert.equal(t.update(a2, null), true);
  assert.equal(t.checkout().get("ns/a")!.current.size, 0);
  assert.deepEqual(ips(), []);
});

/** An endpoint of Pod `pod` (targetRef with a uid) with the given conditions. */
function podEp(ip: string, pod: string, c: Endpoint["conditions"]): Endpoint {
  return ep(ip, {
    conditions: c,
    targetRef: { kind: "Pod", namespace: "ns", name: pod, uid: pod },
  });
}
const READY = { ready: true, serving: true, terminating: false };
const GHOST = { ready: false, serving: false, terminating: true };
const DRAINING = { ready: false, serving: true, terminating: true };

Deno.test("IP reuse (kubernetes#135266): a terminating ghost never decides a reused address", () => {
  for (const ghostLast of [false, true]) {
    const t = new EndpointsTracker("me", captureLog().log);
    const ghost = slice("a-old", "a", [podEp("198.18.1.5", "old-pod", GHOST)]);
    const live = slice("a-new", "a", [podEp("198.18.1.5", "new-pod", READY)]);
    for (const s of ghostLast ? [live, ghost] : [ghost, live]) t.update(null, s);
    const eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
    assert.deepEqual(
      eps.map((e) => [e.ip, e.ready, e.serving, e.terminating]),
      [["198.18.1.5", true, true, false]],
      `ghost written ${ghostLast ? "last" : "first"}`,
    );
  }
});

Deno.test("an endpoint moving between slices (same targetRef) takes the newer slice's conditions", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  t.update(null, slice("a-1", "a", [podEp("198.18.1.5", "p", READY), ep("198.18.1.6")]));
  t.checkout();
  // The controller writes the endpoint into a-2 as it starts terminating, before a-1 drops it.
  t.update(null, slice("a-2", "a", [podEp("198.18.1.5", "p", DRAINING)]));
  let eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
  assert.deepEqual(eps.map((e) => [e.ip, e.terminating]), [["198.18.1.5", true], [
    "198.18.1.6",
    false,
  ]]);
  // a-1 rewritten for another reason, still holding its older copy: now a-1 is the newer one.
  t.update(null, slice("a-1", "a", [podEp("198.18.1.5", "p", READY), ep("198.18.1.7")]));
  eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
  assert.equal(eps.find((e) => e.ip === "198.18.1.5")!.terminating, false);
  // Without targetRefs the same pair is two Pods: the live copy stays.
  const u = new EndpointsTracker("me", captureLog().log);
  u.update(null, slice("a-1", "a", [ep("198.18.1.5", { conditions: READY })]));
  u.update(null, slice("a-2", "a", [ep("198.18.1.5", { conditions: DRAINING })]));
  assert.equal(u.checkout().get("ns/a")!.current.get(HTTP4)![0].terminating, false);
});

Deno.test("duplicates of one address: ties go to the newer copy, across slices and within one", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  t.update(null, slice("a-1", "a", [podEp("198.18.1.5", "p", { ...DRAINING, ready: false })]));
  t.update(null, slice("a-2", "a", [podEp("198.18.1.5", "q", { ...GHOST, serving: true })]));
  let eps = t.checkout().get("ns/a")!.current.get(HTTP4)!;
  assert.deepEqual(eps.map((e) => [e.serving, e.terminating]), [[true, true]]);
  // Within one slice a later position is newer; a live Pod still beats a later ghost.
  const one = parseEndpointSlice(
    slice("b-1", "b", [
      podEp("198.18.1.8", "new", READY),
      podEp("198.18.1.8", "old", GHOST),
      podEp("198.18.1.9", "p", READY),
      podEp("198.18.1.9", "p", DRAINING),
    ]),
    "me",
  )!;
  assert.deepEqual(one.ports[0].endpoints.map((e) => [e.ip, e.terminating]), [
    ["198.18.1.8", false],
    ["198.18.1.9", true],
  ]);
  assert.equal(one.targets?.length, 2);
  // A slice whose only change is a targetRef is a change (the next duplicate may depend on it).
  const s1 = slice("c-1", "c", [podEp("198.18.2.1", "p", READY)]);
  assert.equal(t.update(null, s1), true);
  assert.equal(t.update(s1, slice("c-1", "c", [podEp("198.18.2.1", "p2", READY)])), true);
  eps = t.checkout().get("ns/c")!.current.get(HTTP4)!;
  assert.equal(eps.length, 1);
});

Deno.test("a slice re-written unchanged is the newer word on an address a sibling shares", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  const a1 = slice("a-1", "a", [podEp("198.18.1.5", "p", READY), ep("198.18.1.6")]);
  const a2 = slice("a-2", "a", [podEp("198.18.1.5", "p", DRAINING)]);
  t.update(null, a1);
  t.update(null, a2);
  assert.equal(t.checkout().get("ns/a")!.current.get(HTTP4)![0].terminating, true);
  // a-1 written again (new version, same endpoints): its copy of the shared Pod is current.
  const again = { ...a1, metadata: { ...a1.metadata, resourceVersion: "7" } };
  assert.equal(t.update(a1, again), true);
  assert.equal(t.checkout().get("ns/a")!.current.get(HTTP4)![0].terminating, false);
  // Without a shared address, an unchanged re-write is no change at all.
  const b1 = slice("b-1", "b", [ep("198.18.2.1")]);
  t.update(null, b1);
  t.update(null, slice("b-2", "b", [ep("198.18.2.2")]));
  t.checkout();
  assert.equal(t.update(b1, { ...b1, metadata: { ...b1.metadata, resourceVersion: "9" } }), false);
  assert.equal(t.pendingCount, 0);
});

Deno.test("a slice out of address order is sorted once; repeats side by side keep list order", () => {
  const one = parseEndpointSlice(
    slice("d-1", "d", [
      podEp("198.18.1.20", "a", READY),
      podEp("198.18.1.3", "b", READY),
      podEp("198.018.1.20", "a", DRAINING), // the same Pod and address (leading zero), later: newer
      podEp("198.18.0.255", "d", READY),
      podEp("198.18.1.3", "e", GHOST), // another Pod's ghost: the live copy stays
    ]),
    "me",
  )!;
  assert.deepEqual(one.ports[0].endpoints.map((e) => [e.ip, e.terminating]), [
    ["198.18.0.255", false],
    ["198.18.1.3", false],
    ["198.18.1.20", true],
  ]);
  assert.equal(one.targets?.length, 3);
  // Without targetRefs there are no targets; IPv6 sorts numerically, not as text.
  const six = parseEndpointSlice(
    slice(
      "e-1",
      "e",
      [ep("2001:db8::10"), ep("2001:DB8::9"), ep("2001:db8::1:0")],
      undefined,
      "IPv6",
    ),
    "me",
  )!;
  assert.deepEqual(six.ports[0].endpoints.map((e) => e.ip), [
    "2001:db8::9",
    "2001:db8::10",
    "2001:db8::1:0",
  ]);
  assert.equal(six.targets, undefined);
  // An address of the other family is skipped with its line, in either slice type.
  const { lines, log } = captureLog();
  const mixed = parseEndpointSlice(
    slice("f-1", "f", [ep("2001:db8::1"), ep("198.18.1.1")]),
    "me",
    log,
  )!;
  assert.deepEqual(mixed.ports[0].endpoints.map((e) => e.ip), ["198.18.1.1"]);
  assert.equal(lines.length, 1);
  assert.match(
    lines[0].msg,
    /endpoints\[0\]\.addresses\[0\] is "2001:db8::1", expected an IPv4 address/,
  );
});

Deno.test("portEndpoints: a lone slice read in place; several merged once, again after a change", () => {
  const t = new EndpointsTracker("me", captureLog().log);
  const two: EndpointPort[] = [
    { name: "http", protocol: "TCP", port: 8080 },
    { name: "dns", protocol: "UDP", port: 53 },
  ];
  const DNS4 = portKey(4, "dns", "UDP");
  t.update(null, slice("a-1", "a", [ep("198.18.1.2"), ep("198.18.1.1")], two));
  const lone = t.portEndpoints("ns/a", HTTP4)!;
  assert.deepEqual(lone.map((e) => e.ip), ["198.18.1.1", "198.18.1.2"]);
  assert.equal(lone, t.endpoints("ns/a").get(HTTP4), "the slice's own list");
  assert.equal(t.portEndpoints("ns/a", portKey(4, "nope", "TCP")), undefined);
  assert.equal(t.portEndpoints("ns/none", HTTP4), undefined);
  const a2 = slice("a-2", "a", [ep("198.18.1.3")], two);
  t.update(null, a2);
  assert.deepEqual(t.portEndpoints("ns/a", HTTP4)!.map((e) => e.ip), [
    "198.18.1.1",
    "198.18.1.2",
    "198.18.1.3",
  ]);
  assert.deepEqual(t.portEndpoints("ns/a", DNS4)!.map((e) => e.port), [53, 53, 53]);
  // A change to one slice is seen at once (the merge is not kept past it).
  t.update(a2, {
    ...slice("a-2", "a", [ep("198.18.1.4")], two),
    metadata: { ...a2.metadata!, resourceVersion: "2" },
  });
  assert.deepEqual(t.portEndpoints("ns/a", DNS4)!.map((e) => e.ip), [
    "198.18.1.1",
    "198.18.1.2",
    "198.18.1.4",
  ]);
  assert.deepEqual([...t.checkoutServices()], ["ns/a"]);
  assert.deepEqual([...t.checkoutServices()], []);
});
