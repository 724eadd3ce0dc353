import assert from "node:assert/strict";
import { FakeConntrack, type FakeEntryInput } from "../ffi/conntrack/fake.ts";
import { PROTO_SCTP, PROTO_TCP } from "../ffi/conntrack/types.ts";
import type { ServicePortInfo, StaleReport } from "../proxier/model.ts";
import { cleanupStale, staleFilters } from "./cleanup.ts";
import { servicePort } from "../proxier/model_testing.ts";

function svc(id: string, clusterIP: string, port: number, more: Partial<ServicePortInfo> = {}) {
  return servicePort(id, { name: id, portName: "", protocol: "UDP", clusterIP, port, ...more });
}

function flow(sport: number, dst: string, dport: number, to?: string): FakeEntryInput {
  const src = dst.includes(":") ? "2001:db8:9::1" : "198.18.200.1";
  return { origSrc: src, origSport: sport, origDst: dst, origDport: dport, replySrc: to };
}

const DNS = svc("dns", "198.19.0.10", 53, {
  externalIPs: ["198.18.50.1"],
  loadBalancerIPs: ["198.18.60.1"],
  nodePort: 30053,
});

function run(report: StaleReport, entries: FakeEntryInput[], nodePortIPs?: string[]) {
  const ct = new FakeConntrack(entries);
  const family = entries[0]?.origDst.includes(":") ? 6 : 4;
  const res = cleanupStale(ct, report, family, { nodePortIPs, chunkSize: 2 });
  const left = new Set(ct.entries().map((e) => e.origSport));
  const gone = entries.map((e) => e.origSport).filter((p) => !left.has(p));
  return { ct, res, gone };
}

Deno.test("cleanup flushes flows to every frontend of a service that got endpoints", () => {
  const { res, gone } = run({ servicesWithNewEndpoints: [DNS], deletedEndpoints: [] }, [
    flow(1, "198.19.0.10", 53), // ClusterIP, untranslated (the blackhole)
    flow(2, "198.18.50.1", 53), // ExternalIP
    flow(3, "198.18.60.1", 53), // LB IP
    flow(4, "198.18.100.1", 30053), // NodePort on a node address
    flow(5, "198.19.0.10", 54), // another port of that IP: kept
    flow(6, "198.19.0.11", 53), // another IP: kept
    { ...flow(7, "198.19.0.10", 53), proto: PROTO_TCP }, // TCP: kept
  ]);
  assert.deepEqual(gone, [1, 2, 3, 4]);
  assert.equal(res.byReason["newly-active-frontend"], 3);
  assert.equal(res.byReason["newly-active-nodeport"], 1);
  assert.equal(res.scanned, 6);
  assert.equal(res.deleted, 4);
});

Deno.test("cleanup deletes flows DNATed to a removed endpoint, via frontends and the NodePort", () => {
  const report = {
    servicesWithNewEndpoints: [],
    deletedEndpoints: [{ service: DNS, ip: "198.18.1.1", port: 5353 }],
  };
  const { res, gone } = run(report, [
    flow(1, "198.19.0.10", 53, "198.18.1.1"),
    flow(2, "198.18.50.1", 53, "198.18.1.1"),
    flow(3, "198.18.60.1", 53, "198.18.1.1"),
    flow(4, "198.18.100.1", 30053, "198.18.1.1"),
    flow(5, "198.19.0.10", 53, "198.18.1.2"), // to an endpoint that stays
    flow(6, "198.18.100.1", 30053, "198.18.1.2"), // NodePort, endpoint that stays
    flow(7, "198.19.0.10", 54, "198.18.1.1"), // other port of the ClusterIP
    flow(8, "198.18.1.1", 5353), // direct pod traffic
  ]);
  assert.deepEqual(gone, [1, 2, 3, 4]);
  assert.equal(res.byReason["removed-endpoint"], 3);
  assert.equal(res.byReason["removed-endpoint-nodeport"], 1);
});

Deno.test("cleanup nodePortIPs limits NodePort filters to those destinations", () => {
  const report = {
    servicesWithNewEndpoints: [DNS],
    deletedEndpoints: [{ service: DNS, ip: "198.18.1.1", port: 5353 }],
  };
  const { gone } = run(report, [
    flow(1, "198.18.100.1", 30053),
    flow(2, "198.18.77.7", 30053), // not a node address
    flow(3, "198.18.77.7", 30053 + 1, "198.18.1.1"),
  ], ["198.18.100.1"]);
  assert.deepEqual(gone, [1]);
});

Deno.test("cleanup ignores non-UDP services, another family, and skips the dump when idle", () => {
  const sctp = svc("sctp", "198.19.0.12", 53, { protocol: "SCTP" });
  const v6 = svc("v6", "2001:db8:1::a", 53);
  const ct = new FakeConntrack([
    { ...flow(1, "198.19.0.12", 53), proto: PROTO_SCTP },
    flow(2, "198.19.0.12", 53),
  ]);
  const res = cleanupStale(ct, {
    servicesWithNewEndpoints: [sctp, v6],
    deletedEndpoints: [{ service: sctp, ip: "198.18.1.1", port: 53 }],
  }, 4);
  assert.equal(ct.dumpCalls, 0);
  assert.equal(res.deleted, 0);
  assert.equal(ct.size, 2);
});

Deno.test("cleanup works for IPv6 with non-canonical report addresses", () => {
  const v6 = svc("v6", "2001:DB8:1:0::A", 53, { nodePort: 30053 });
  const { gone } = run({
    servicesWithNewEndpoints: [],
    deletedEndpoints: [{ service: v6, ip: "2001:db8:2:0::1", port: 53 }],
  }, [
    flow(1, "2001:db8:1::a", 53, "2001:db8:2::1"),
    flow(2, "2001:db8::5", 30053, "2001:db8:2::1"),
    flow(3, "2001:db8:1::a", 53, "2001:db8:2::2"),
  ]);
  assert.deepEqual(gone, [1, 2]);
});

Deno.test("cleanup acts on an interrupted dump and logs it", () => {
  const ct = new FakeConntrack([flow(1, "198.19.0.10", 53), flow(2, "198.19.0.10", 53)]);
  ct.interruptNextDumpAfter = 1;
  const logs: string[] = [];
  const res = cleanupStale(
    ct,
    { servicesWithNewEndpoints: [DNS], deletedEndpoints: [] },
    4,
    { log: (m) => logs.push(m) },
  );
  assert.equal(res.interrupted, true);
  assert.equal(res.deleted, 1);
  assert.match(logs[0], /interrupted after 1 entries/);
});

Deno.test("staleFilters names the bad address", () => {
  assert.throws(
    () =>
      staleFilters({
        servicesWithNewEndpoints: [],
        deletedEndpoints: [{ service: DNS, ip: "not-an-ip", port: 1 }],
      }, 4),
    /removed endpoint of dns "not-an-ip" is not an IP address/,
  );
});

Deno.test("cleanup deletes every flow to a deleted UDP service's frontends and NodePort", () => {
  const report: StaleReport = {
    servicesWithNewEndpoints: [],
    deletedEndpoints: [],
    deletedServices: [DNS],
  };
  const { res, gone } = run(report, [
    flow(1, "198.19.0.10", 53, "198.18.1.1"), // ClusterIP, DNATed to a former endpoint
    flow(2, "198.19.0.10", 53), // ClusterIP, never DNATed
    flow(3, "198.18.50.1", 53, "198.18.1.7"), // ExternalIP, an endpoint that stopped long ago
    flow(4, "198.18.60.1", 53, "198.18.1.1"), // LB IP
    flow(5, "198.18.100.1", 30053, "198.18.1.1"), // NodePort
    flow(6, "198.19.0.10", 54, "198.18.1.1"), // another port of the ClusterIP: kept
    flow(7, "198.19.0.11", 53, "198.18.1.1"), // another Service: kept
    { ...flow(8, "198.19.0.10", 53, "198.18.1.1"), proto: PROTO_TCP }, // TCP: kept
  ]);
  assert.deepEqual(gone, [1, 2, 3, 4, 5]);
  assert.equal(res.byReason["deleted-service"], 4);
  assert.equal(res.byReason["deleted-service-nodeport"], 1);
});

Deno.test("cleanup of a deleted service: NodePort flows only to NodePort addresses when given", () => {
  const report: StaleReport = {
    servicesWithNewEndpoints: [],
    deletedEndpoints: [],
    deletedServices: [DNS, svc("tcp", "198.19.0.12", 80, { protocol: "TCP", nodePort: 30080 })],
  };
  const { gone } = run(report, [
    flow(1, "198.18.100.1", 30053, "198.18.1.1"), // a NodePort address
    flow(2, "198.18.200.9", 30053, "198.18.200.9"), // elsewhere: not NodePort traffic
    flow(3, "198.19.0.12", 80, "198.18.1.1"), // a deleted TCP service: not ours to clean
    flow(4, "198.18.100.1", 30080, "198.18.1.1"),
  ], ["198.18.100.1"]);
  assert.deepEqual(gone, [1]);
});
