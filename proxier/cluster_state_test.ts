/** ClusterState: joining Services and EndpointSlices, the change sets, cost and incremental correctness. */
import assert from "node:assert/strict";
import type { Endpoint, EndpointSlice, V1Service } from "./k8s_types.ts";
import { ClusterState } from "./cluster_state.ts";
import { ep, ids, newState, slice, svc } from "./testdata/cluster_state.ts";

Deno.test("apply: joins services and endpoints per family (dual-stack)", () => {
  const { cs } = newState();
  cs.updateService(null, svc("a", { ips: ["198.18.100.1", "2001:db8::100:1"] }));
  cs.updateEndpointSlice(null, slice("a-4", "a", [ep("198.18.1.1", { nodeName: "me" })]));
  cs.updateEndpointSlice(null, slice("a-6", "a", [ep("2001:db8::1:1")], { addressType: "IPv6" }));
  assert.equal(cs.pendingServiceChanges, 1);
  assert.equal(cs.pendingEndpointChanges, 2);
  assert.ok(cs.hasPendingChanges());
  const r = cs.apply();
  assert.ok(!cs.hasPendingChanges());
  assert.equal(cs.pendingServiceChanges + cs.pendingEndpointChanges, 0);
  for (const f of [4, 6] as const) {
    const st = r.families[f].state;
    assert.equal(st.family, f);
    assert.deepEqual([...st.services.keys()], ["ns/a:p"]);
    assert.deepEqual(ids(r.families[f].changed), ["ns/a:p"]);
    assert.deepEqual(ids(r.families[f].deleted), []);
  }
  assert.equal(r.families[4].state.services.get("ns/a:p")!.clusterIP, "198.18.100.1");
  assert.equal(r.families[6].state.services.get("ns/a:p")!.clusterIP, "2001:db8::100:1");
  assert.deepEqual(
    r.families[4].state.endpoints.get("ns/a:p")!.map((e) => [e.ip, e.port, e.isLocal]),
    [
      ["198.18.1.1", 5353, true],
    ],
  );
  assert.deepEqual(r.families[6].state.endpoints.get("ns/a:p")!.map((e) => e.ip), [
    "2001:db8::1:1",
  ]);
});

Deno.test("externalIPs: false (AllowServiceExternalIPs=false) leaves them out of the state", () => {
  const withExternal = { ...svc("e"), spec: { ...svc("e").spec, externalIPs: ["198.18.200.1"] } };
  for (const [externalIPs, want] of [[undefined, ["198.18.200.1"]], [false, []]] as const) {
    const { cs } = newState({ externalIPs });
    cs.updateService(null, withExternal);
    const p = cs.apply().families[4].state.services.get("ns/e:p")!;
    assert.deepEqual(p.externalIPs, want);
    assert.equal(p.clusterIP, "198.18.100.1");
  }
});

Deno.test("apply: slice port with another protocol or name does not match the service port", () => {
  const { cs } = newState();
  cs.updateService(null, svc("a", { protocol: "TCP" }));
  cs.updateEndpointSlice(null, slice("a-1", "a", [ep("198.18.1.1")], { protocol: "UDP" }));
  cs.updateEndpointSlice(
    null,
    slice("a-2", "a", [ep("198.18.1.2")], { protocol: "TCP", portName: "q" }),
  );
  const r = cs.apply();
  assert.equal(r.families[4].state.services.size, 1);
  assert.equal(r.families[4].state.endpoints.has("ns/a:p"), false);
  // Fixing the protocol makes the endpoints appear for that id.
  cs.updateEndpointSlice(null, slice("a-1", "a", [ep("198.18.1.1")], { protocol: "TCP" }));
  const r2 = cs.apply();
  assert.deepEqual(ids(r2.families[4].changed), ["ns/a:p"]);
  assert.deepEqual(r2.families[4].state.endpoints.get("ns/a:p")!.map((e) => e.ip), ["198.18.1.1"]);
});

Deno.test("apply: endpoints that arrive before their service are joined when it arrives", () => {
  const { cs } = newState();
  cs.updateEndpointSlice(null, slice("a-1", "a", [ep("198.18.1.1")]));
  let r = cs.apply();
  assert.equal(r.families[4].state.endpoints.size, 0);
  assert.equal(r.families[4].changed.size, 0);
  cs.updateService(null, svc("a"));
  r = cs.apply();
  assert.deepEqual(ids(r.families[4].changed), ["ns/a:p"]);
  assert.equal(r.families[4].state.endpoints.get("ns/a:p")!.length, 1);
});

/** One step of the change-set scenario: what changes, and the sets the next apply reports. */
interface NetStep {
  name: string;
  act: (cs: ClusterState) => void;
  changed4: string[];
  deleted4: string[];
  changed6?: string[];
  deleted6?: string[];
}

/** The scenario, in order, from services a (dual-stack), b (ports x, y) and c with endpoints. */
const NET_STEPS: NetStep[] = [
  { name: "nothing", act: () => {}, changed4: [], deleted4: [] },
  {
    name: "one endpoint change",
    act: (cs) => cs.updateEndpointSlice(null, slice("c-1", "c", [ep("198.18.1.2")])),
    changed4: ["ns/c:p"],
    deleted4: [],
  },
  {
    name: "change then revert",
    act: (cs) => {
      cs.updateEndpointSlice(null, slice("c-1", "c", [ep("198.18.1.3")]));
      cs.updateEndpointSlice(null, slice("c-1", "c", [ep("198.18.1.2")]));
    },
    changed4: [],
    deleted4: [],
  },
  {
    name: "one port of a multi-port service changes",
    act: (cs) =>
      cs.updateService(
        null,
        svc("b", { ports: [{ name: "x", port: 1 }, { name: "y", port: 3 }] }),
      ),
    changed4: ["ns/b:y"],
    deleted4: [],
  },
  {
    name: "port renamed",
    act: (cs) =>
      cs.updateService(
        null,
        svc("b", { ports: [{ name: "x", port: 1 }, { name: "z", port: 3 }] }),
      ),
    changed4: ["ns/b:z"],
    deleted4: ["ns/b:y"],
  },
  {
    name: "dual-stack to single-stack",
    act: (cs) => cs.updateService(null, svc("a", { ips: ["198.18.100.1"] })),
    changed4: [],
    deleted4: [],
    changed6: [],
    deleted6: ["ns/a:p"],
  },
  {
    name: "service deleted",
    act: (cs) => cs.updateService(svc("c"), null),
    changed4: [],
    deleted4: ["ns/c:p"],
  },
  {
    name: "service deleted and re-created identically",
    act: (cs) => {
      cs.updateService(svc("b"), null);
      cs.updateService(
        null,
        svc("b", { ports: [{ name: "x", port: 1 }, { name: "z", port: 3 }] }),
      );
    },
    changed4: [],
    deleted4: [],
  },
  {
    name: "slices deleted",
    act: (cs) => cs.updateEndpointSlice(slice("a-1", "a", []), null),
    changed4: ["ns/a:p"],
    deleted4: [],
  },
];

Deno.test("apply: changed and deleted sets are incremental and net", () => {
  const { cs } = newState();
  cs.updateService(null, svc("a", { ips: ["198.18.100.1", "2001:db8::a"] }));
  cs.updateService(null, svc("b", { ports: [{ name: "x", port: 1 }, { name: "y", port: 2 }] }));
  cs.updateService(null, svc("c"));
  for (const n of ["a", "b", "c"]) {
    cs.updateEndpointSlice(null, slice(`${n}-1`, n, [ep("198.18.1.1")]));
  }
  cs.apply();

  for (const s of NET_STEPS) {
    s.act(cs);
    const r = cs.apply();
    assert.deepEqual(ids(r.families[4].changed), s.changed4, `${s.name}: changed v4`);
    assert.deepEqual(ids(r.families[4].deleted), s.deleted4, `${s.name}: deleted v4`);
    assert.deepEqual(ids(r.families[6].changed), s.changed6 ?? [], `${s.name}: changed v6`);
    assert.deepEqual(ids(r.families[6].deleted), s.deleted6 ?? [], `${s.name}: deleted v6`);
  }
  const st = cs.state(4);
  assert.deepEqual([...st.services.keys()].sort(), ["ns/a:p", "ns/b:x", "ns/b:z"]);
  assert.equal(st.endpoints.has("ns/a:p"), false);
  assert.equal(cs.state(6).services.size, 0);
});

Deno.test("apply cost follows the number of changes (30k services x 10 endpoints)", () => {
  const { cs } = newState();
  const N = 30000;
  // Endpoint addresses cycle through 198.18.0.0/15 (reuse across services is fine here).
  const ipOf = (n: number) => {
    const k = n % 131072;
    return `198.${18 + (k >> 16)}.${(k >> 8) & 0xff}.${k & 0xff}`;
  };
  for (let i = 0; i < N; i++) {
    cs.updateService(null, {
      metadata: { namespace: "bench", name: `s${i}` },
      spec: {
        clusterIP: ipOf(i + 100000),
        ports: [{ name: "http", protocol: "TCP", port: 80 }],
      },
    });
    const endpoints: Endpoint[] = [];
    for (let j = 0; j < 10; j++) {
      endpoints.push({ addresses: [ipOf(i * 10 + j)], nodeName: `n${j}` });
    }
    cs.updateEndpointSlice(null, {
      metadata: {
        namespace: "bench",
        name: `s${i}-x`,
        labels: { "kubernetes.io/service-name": `s${i}` },
      },
      addressType: "IPv4",
      endpoints,
      ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    });
  }
  const t0 = performance.now();
  const full = cs.apply();
  const fullMs = performance.now() - t0;
  assert.equal(full.families[4].state.services.size, N);
  assert.equal(full.families[4].changed.size, N);

  const times: number[] = [];
  for (let k = 0; k < 20; k++) {
    const i = (k * 1237) % N;
    cs.updateEndpointSlice(null, {
      metadata: {
        namespace: "bench",
        name: `s${i}-x`,
        labels: { "kubernetes.io/service-name": `s${i}` },
      },
      addressType: "IPv4",
      endpoints: [{ addresses: [`198.18.200.${k}`] }],
      ports: [{ name: "http", protocol: "TCP", port: 8080 }],
    });
    const t = performance.now();
    const r = cs.apply();
    times.push(performance.now() - t);
    assert.deepEqual([...r.families[4].changed], [`bench/s${i}:http`]);
  }
  times.sort((a, b) => a - b);
  const median = times[times.length >> 1];
  console.log(
    `30k services: full apply ${fullMs.toFixed(0)} ms; one-change apply median ${
      median.toFixed(3)
    } ms, max ${times.at(-1)!.toFixed(3)} ms`,
  );
  assert.ok(median < 5, `one-change apply took ${median} ms`);
});

/** mulberry32, a small deterministic PRNG so failures reproduce: an integer below `n`. */
function prng(seed: number): (n: number) => number {
  return (n) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
}

/** Random Services and EndpointSlices over a few names, ports and addresses. */
function randomObjects(rnd: (n: number) => number) {
  const pick = <T>(xs: T[]) => xs[rnd(xs.length)];
  const service = (name: string): V1Service => {
    const dual = rnd(2) === 0;
    const n = 1 + rnd(2);
    return svc(name, {
      protocol: pick(["TCP", "UDP"]),
      ips: dual ? [`198.18.100.${rnd(4)}`, `2001:db8::${rnd(4)}`] : [`198.18.100.${rnd(4)}`],
      ports: [{ name: "p", port: 53 }, { name: "q", port: 54 }].slice(0, n),
    });
  };
  const endpointSlice = (name: string): EndpointSlice => {
    const v6 = rnd(3) === 0;
    const eps: Endpoint[] = [];
    for (let i = rnd(4); i > 0; i--) {
      eps.push(ep(v6 ? `2001:db8::1:${rnd(3)}` : `198.18.1.${rnd(3)}`, {
        conditions: { ready: rnd(3) > 0, serving: rnd(4) > 0, terminating: rnd(4) === 0 },
        nodeName: pick(["me", "other"]),
      }));
    }
    return slice(name, pick(["a", "b"]), eps, {
      protocol: pick(["TCP", "UDP"]),
      portName: pick(["p", "q"]),
      port: 5000 + rnd(2),
      addressType: v6 ? "IPv6" : "IPv4",
    });
  };
  return { pick, service, endpointSlice };
}

/** A family's state as text per service port, to compare two states. */
function snapshot(cs: ClusterState, f: 4 | 6): Map<string, string> {
  const st = cs.state(f);
  const out = new Map<string, string>();
  for (const [id, s] of st.services) out.set(id, JSON.stringify([s, st.endpoints.get(id) ?? []]));
  return out;
}

/** The objects the random test has sent, in update order (freshness matters for duplicates). */
interface Sent {
  services: Map<string, V1Service>;
  slices: Map<string, EndpointSlice>;
}

/** One round of 1-4 random adds, updates and deletes, sent to `cs` and recorded in `sent`. */
function randomRound(
  cs: ClusterState,
  rnd: (n: number) => number,
  gen: ReturnType<typeof randomObjects>,
  sent: Sent,
): void {
  for (let k = 1 + rnd(4); k > 0; k--) {
    if (rnd(2) === 0) {
      const name = gen.pick(["a", "b", "c"]);
      const cur = rnd(4) === 0 ? null : gen.service(name);
      cs.updateService(sent.services.get(name) ?? null, cur);
      if (cur) sent.services.set(name, cur);
      else sent.services.delete(name);
    } else {
      const name = gen.pick(["s1", "s2", "s3", "s4"]);
      const cur = rnd(4) === 0 ? null : gen.endpointSlice(name);
      const old = sent.slices.get(name) ?? null;
      if (cur) {
        cs.updateEndpointSlice(old, cur);
        // Re-insert so iteration order is update order.
        sent.slices.delete(name);
        sent.slices.set(name, cur);
      } else if (old) {
        cs.updateEndpointSlice(old, null);
        sent.slices.delete(name);
      }
    }
  }
}

Deno.test("apply: random event sequences match a from-scratch rebuild (incremental correctness)", () => {
  // 1500 rounds: with the slice replay order reversed (freshness ignored) this test fails by
  // round ~400.
  const rnd = prng(12345);
  const gen = randomObjects(rnd);
  const sent: Sent = { services: new Map(), slices: new Map() };
  let roundsWithEndpoints = 0;
  const { cs } = newState();
  let prev: Record<4 | 6, Map<string, string>> = { 4: new Map(), 6: new Map() };
  for (let round = 0; round < 1500; round++) {
    randomRound(cs, rnd, gen, sent);
    const r = cs.apply();
    const fresh = new ClusterState({ nodeName: "me", log: () => {} });
    for (const s of sent.services.values()) fresh.updateService(null, s);
    for (const s of sent.slices.values()) fresh.updateEndpointSlice(null, s);
    fresh.apply();
    for (const f of [4, 6] as const) {
      const now = snapshot(cs, f);
      assert.deepEqual(now, snapshot(fresh, f), `round ${round} family ${f}`);
      const changed = [...now.keys()].filter((id) => prev[f].get(id) !== now.get(id)).sort();
      const deleted = [...prev[f].keys()].filter((id) => !now.has(id)).sort();
      assert.deepEqual(ids(r.families[f].changed), changed, `round ${round} changed v${f}`);
      assert.deepEqual(ids(r.families[f].deleted), deleted, `round ${round} deleted v${f}`);
    }
    prev = { 4: snapshot(cs, 4), 6: snapshot(cs, 6) };
    if (cs.state(4).endpoints.size + cs.state(6).endpoints.size > 0) roundsWithEndpoints++;
  }
  assert.ok(
    roundsWithEndpoints > 500,
    `only ${roundsWithEndpoints} rounds had endpoints: the generator is too weak`,
  );
});

Deno.test("apply: reports last-change-trigger-times of applied slice changes", () => {
  const { cs, lines } = newState({ startTime: Date.parse("2026-01-01T00:00:00Z") });
  const withTime = (name: string, t: string, ip: string) => {
    const s = slice(name, "a", [ep(ip)]);
    s.metadata!.annotations = { "endpoints.kubernetes.io/last-change-trigger-time": t };
    return s;
  };
  cs.updateEndpointSlice(null, withTime("a-1", "2026-02-01T10:00:00Z", "198.18.1.1"));
  cs.updateEndpointSlice(null, withTime("a-2", "2025-12-31T23:59:59Z", "198.18.1.2")); // before start
  cs.updateEndpointSlice(null, withTime("a-3", "yesterday", "198.18.1.3")); // bad: logged
  assert.deepEqual(cs.apply().triggerTimes, [Date.parse("2026-02-01T10:00:00Z")]);
  assert.equal(lines.length, 1);
  assert.match(lines[0].msg, /last-change-trigger-time/);
  assert.deepEqual(cs.apply().triggerTimes, []);
  // An update that changes nothing reports no trigger time.
  cs.updateEndpointSlice(null, withTime("a-1", "2026-02-01T11:00:00Z", "198.18.1.1"));
  assert.deepEqual(cs.apply().triggerTimes, []);
});
