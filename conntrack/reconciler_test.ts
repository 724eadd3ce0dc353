import assert from "node:assert/strict";
import { FakeConntrack, type FakeEntryInput } from "../ffi/conntrack/fake.ts";
import { PROTO_SCTP, PROTO_TCP } from "../ffi/conntrack/types.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../proxier/model.ts";
import type { IpFamily } from "../net/family.ts";
import { buildFrontendIndex, reconcile, staleReason } from "./reconciler.ts";
import { endpoint, servicePort } from "../proxier/model_testing.ts";

function svc(
  id: string,
  clusterIP: string,
  port: number,
  more: Partial<ServicePortInfo> = {},
): ServicePortInfo {
  return servicePort(id, { name: id, portName: "", protocol: "UDP", clusterIP, port, ...more });
}

const ep = (ip: string, port = 5353, more: Partial<EndpointInfo> = {}) => endpoint(ip, port, more);

function state(
  family: IpFamily,
  services: ServicePortInfo[],
  endpoints: Record<string, EndpointInfo[]>,
  serviceCIDRs: string[] = [],
): ProxyState {
  return {
    family,
    services: new Map(services.map((s) => [s.id, s])),
    endpoints: new Map(Object.entries(endpoints)),
    node: { name: "n1", labels: {}, ips: ["198.18.100.1"], podCIDRs: [] },
    serviceCIDRs,
  };
}

/** A client flow; `to` is the DNAT target (reply source), default none. */
function flow(src: string, sport: number, dst: string, dport: number, to?: string): FakeEntryInput {
  return { origSrc: src, origSport: sport, origDst: dst, origDport: dport, replySrc: to };
}

const C = "198.18.200.1"; // a client
const DNS = svc("dns", "198.19.0.10", 53, {
  externalIPs: ["198.18.50.1"],
  loadBalancerIPs: ["198.18.60.1"],
  nodePort: 30053,
});
const EMPTY = svc("empty", "198.19.0.20", 514, { nodePort: 30514 });
const V4 = state(4, [DNS, EMPTY, svc("web", "198.19.0.30", 80, { protocol: "TCP" })], {
  dns: [ep("198.18.1.1"), ep("198.18.1.2", 5353, { ready: false, serving: false })],
  empty: [],
}, ["198.19.0.0/16"]);

function run(entries: FakeEntryInput[], st = V4, family: IpFamily = 4) {
  const ct = new FakeConntrack(entries);
  const before = ct.entries();
  const res = reconcile(ct, family, st, { chunkSize: 2 });
  const left = new Set(ct.entries().map((e) => e.id));
  const gone = before.filter((e) => !left.has(e.id)).map((e) => e.origSport);
  return { ct, res, gone };
}

Deno.test("reconcile deletes frontend flows answered by a non-endpoint, per frontend kind", () => {
  const { res, gone } = run([
    flow(C, 1, "198.19.0.10", 53, "198.18.9.9"), // ClusterIP -> removed endpoint
    flow(C, 2, "198.18.50.1", 53, "198.18.9.9"), // ExternalIP -> removed endpoint
    flow(C, 3, "198.18.60.1", 53, "198.18.9.9"), // LB IP -> removed endpoint
    flow(C, 4, "198.19.0.10", 53), // never DNATed (created before the rules)
    flow(C, 5, "198.19.0.10", 53, "198.18.1.2"), // endpoint no longer serving
  ]);
  assert.deepEqual(gone.sort(), [1, 2, 3, 4, 5]);
  assert.equal(res.deleted, 5);
  assert.equal(res.byReason["frontend-wrong-endpoint"], 5);
  assert.equal(res.scanned, 5);
});

Deno.test("reconcile keeps flows to a serving endpoint, other protocols and non-service traffic", () => {
  const { res, gone } = run([
    flow(C, 1, "198.19.0.10", 53, "198.18.1.1"), // right endpoint
    flow(C, 2, "198.18.50.1", 53, "198.18.1.1"), // right endpoint via ExternalIP
    { ...flow(C, 3, "198.19.0.10", 53, "198.18.9.9"), proto: PROTO_TCP }, // TCP: not ours
    { ...flow(C, 4, "198.19.0.10", 53, "198.18.9.9"), proto: PROTO_SCTP }, // SCTP: not ours
    flow(C, 5, "198.18.7.7", 53), // plain traffic to a pod
    flow(C, 6, "198.18.7.7", 53, "198.18.8.8"), // DNATed by someone else, outside service range
    flow(C, 7, "198.19.0.10", 54), // ClusterIP, other port, not DNATed: not kube-proxy's
  ]);
  assert.deepEqual(gone, []);
  assert.equal(res.stale, 0);
  assert.equal(res.scanned, 5); // only UDP is dumped
});

Deno.test("reconcile: a service without endpoints keeps untranslated flows, drops DNATed ones", () => {
  const { res, gone } = run([
    flow(C, 1, "198.19.0.20", 514), // untranslated: left for the newly-active cleanup
    flow(C, 2, "198.19.0.20", 514, "198.18.3.3"), // scaled to zero, still DNATed (#139629)
    flow(C, 3, "198.18.100.1", 30514, "198.18.3.3"), // its NodePort, still DNATed
    flow(C, 4, "198.18.100.1", 30514), // its NodePort, untranslated
  ]);
  assert.deepEqual(gone.sort(), [2, 3]);
  assert.equal(res.byReason["frontend-no-endpoints"], 1);
  assert.equal(res.byReason["nodeport-no-endpoints"], 1);
});

Deno.test("reconcile: NodePort flows to any node address are checked against endpoints", () => {
  const { res, gone } = run([
    flow(C, 1, "198.18.100.1", 30053, "198.18.9.9"), // wrong endpoint
    flow(C, 2, "198.18.100.2", 30053, "198.18.9.9"), // another local address
    flow(C, 3, "198.18.100.1", 30053, "198.18.1.1"), // right endpoint
  ]);
  assert.deepEqual(gone.sort(), [1, 2]);
  assert.equal(res.byReason["nodeport-wrong-endpoint"], 2);
});

Deno.test("reconcile: nodePortIPs restricts the NodePort rules to those destinations", () => {
  const ct = new FakeConntrack([
    flow(C, 1, "198.18.100.1", 30053, "198.18.9.9"),
    flow(C, 2, "198.18.77.7", 30053, "198.18.9.9"), // not a node address: someone else's port
  ]);
  const res = reconcile(ct, 4, V4, { nodePortIPs: ["198.18.100.1"] });
  assert.equal(res.deleted, 1);
  assert.deepEqual(ct.entries().map((e) => e.origSport), [2]);
});

Deno.test("reconcile: a frontend port equal to a NodePort is judged as a frontend only", () => {
  const st = state(4, [svc("a", "198.19.0.40", 30053), DNS], {
    a: [ep("198.18.4.4")],
    dns: [ep("198.18.1.1")],
  });
  const { gone } = run([flow(C, 1, "198.19.0.40", 30053, "198.18.4.4")], st);
  assert.deepEqual(gone, []);
});

Deno.test("reconcile: DNATed flows to a deleted frontend inside the service range go (#141371)", () => {
  const { res, gone } = run([
    flow(C, 1, "198.19.5.5", 53, "198.18.9.9"), // deleted service, in ServiceCIDR
    flow(C, 2, "198.19.0.10", 54, "198.18.9.9"), // removed port of a live ClusterIP
    flow(C, 3, "198.19.0.30", 80, "198.18.9.9"), // UDP to a TCP-only service's ClusterIP
    flow(C, 4, "198.19.5.5", 53), // untranslated: nothing to undo
  ]);
  assert.deepEqual(gone.sort(), [1, 2, 3]);
  assert.equal(res.byReason["deleted-frontend"], 3);
});

Deno.test("reconcile: without ServiceCIDRs only current ClusterIPs count as service space", () => {
  const st = state(4, [DNS], { dns: [ep("198.18.1.1")] }, []);
  const { gone } = run([
    flow(C, 1, "198.19.5.5", 53, "198.18.9.9"),
    flow(C, 2, "198.19.0.10", 54, "198.18.9.9"),
  ], st);
  assert.deepEqual(gone, [2]);
});

Deno.test("reconcile handles IPv6 and non-canonical model addresses", () => {
  const st = state(
    6,
    [
      svc("dns6", "2001:DB8:1:0::a", 53, { nodePort: 30053 }),
    ],
    { dns6: [ep("2001:db8:2:0:0:0:0:1")] },
    ["2001:db8:1::/112"],
  );
  const c = "2001:db8:9::1";
  const { res, gone } = run(
    [
      flow(c, 1, "2001:db8:1::a", 53, "2001:db8:2::1"), // right endpoint
      flow(c, 2, "2001:db8:1::a", 53, "2001:db8:2::9"), // wrong endpoint
      flow(c, 3, "2001:db8::5", 30053, "2001:db8:2::9"), // NodePort, wrong endpoint
      flow(c, 4, "2001:db8:1::77", 53, "2001:db8:2::9"), // deleted frontend
      flow(c, 5, "2001:db8:3::1", 53, "2001:db8:2::9"), // outside the range
      flow(C, 6, "198.19.0.10", 53, "198.18.9.9"), // IPv4: another family's dump
    ],
    st,
    6,
  );
  assert.deepEqual(gone.sort(), [2, 3, 4]);
  assert.equal(res.scanned, 5);
});

Deno.test("reconcile acts on the entries of an interrupted dump", () => {
  const ct = new FakeConntrack([
    flow(C, 1, "198.19.0.10", 53, "198.18.9.9"),
    flow(C, 2, "198.19.0.10", 53, "198.18.9.9"),
    flow(C, 3, "198.19.0.10", 53, "198.18.9.9"),
  ]);
  ct.interruptNextDumpAfter = 2;
  const logs: string[] = [];
  const res = reconcile(ct, 4, V4, { log: (m) => logs.push(m) });
  assert.equal(res.interrupted, true);
  assert.equal(res.scanned, 2);
  assert.equal(res.deleted, 2);
  assert.equal(ct.size, 1);
  assert.match(logs.join("\n"), /interrupted after 2 entries/);
  // The next pass sees the rest.
  const again = reconcile(ct, 4, V4);
  assert.equal(again.interrupted, false);
  assert.equal(again.deleted, 1);
});

Deno.test("reconcile deletes in chunks and counts entries that vanished meanwhile", () => {
  const entries = Array.from(
    { length: 7 },
    (_, i) => flow(C, 100 + i, "198.19.0.10", 53, "198.18.9.9"),
  );
  const ct = new FakeConntrack(entries);
  // A flow that expires and is re-created with the same tuple between dump and delete.
  const realDelete = ct.delete.bind(ct);
  let raced = false;
  ct.delete = (batch) => {
    if (!raced) {
      raced = true;
      const victim = ct.entries().find((e) => e.origSport === 100)!;
      realDelete([victim]);
      ct.add({ ...victim, id: 999 });
    }
    return realDelete(batch);
  };
  const res = reconcile(ct, 4, V4, { chunkSize: 3 });
  assert.deepEqual(ct.deleteBatches.slice(1), [3, 3, 1]);
  assert.equal(res.stale, 7);
  assert.equal(res.deleted, 6);
  assert.equal(res.alreadyGone, 1); // the id no longer matches: the new flow survives
  assert.deepEqual(ct.entries().map((e) => e.id), [999]);
});

Deno.test("reconcile reports non-ENOENT delete failures", () => {
  const ct = new FakeConntrack([flow(C, 1, "198.19.0.10", 53, "198.18.9.9")]);
  ct.delete = (batch) => ({
    deleted: 0,
    failed: batch.map((entry) => ({ entry, error: "EPERM" })),
  });
  const logs: string[] = [];
  const res = reconcile(ct, 4, V4, { log: (m) => logs.push(m) });
  assert.equal(res.errors, 1);
  assert.match(logs[0], /1 deletes failed, first: 198\.18\.200\.1:1 -> 198\.19\.0\.10:53: EPERM/);
});

Deno.test("reconcile skips the dump when there is no UDP service state", () => {
  const ct = new FakeConntrack([flow(C, 1, "198.19.0.10", 53, "198.18.9.9")]);
  const res = reconcile(ct, 4, state(4, [], {}));
  assert.equal(ct.dumpCalls, 0);
  assert.equal(res.scanned, 0);
});

Deno.test("reconcile rejects a state of the wrong family and malformed addresses", () => {
  const ct = new FakeConntrack();
  assert.throws(() => reconcile(ct, 6, V4), /state is for IPv4 but IPv6/);
  assert.throws(
    () => buildFrontendIndex(state(4, [svc("bad", "198.19.0.300", 53)], {})),
    /ClusterIP of bad "198\.19\.0\.300" is not an IP address/,
  );
  assert.throws(
    () => buildFrontendIndex(state(4, [], {}, ["198.19.0.0"])),
    /ServiceCIDR "198\.19\.0\.0" is not a CIDR/,
  );
});

Deno.test("staleReason leaves flows of another family's service alone", () => {
  const idx = buildFrontendIndex(V4);
  const e = new FakeConntrack().add(flow("2001:db8::1", 1, "2001:db8::2", 53, "2001:db8::3"));
  assert.equal(staleReason(idx, e), undefined);
});
