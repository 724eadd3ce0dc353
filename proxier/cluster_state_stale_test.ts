/** ClusterState: the stale report (UDP/SCTP endpoints and Services gone, for conntrack). */
import assert from "node:assert/strict";
import { ClusterState } from "./cluster_state.ts";
import { ep, newState, slice, svc } from "./testdata/cluster_state.ts";

/** One step of the stale report scenario: what changes, and what the next apply reports. */
interface StaleStep {
  name: string;
  act: (cs: ClusterState) => void;
  newEps: string[];
  deleted: string[];
}

/** The scenario, in order: each step acts on the state the steps before it left. */
const STALE_STEPS: StaleStep[] = [
  {
    name: "services without endpoints",
    act: (cs) => {
      cs.updateService(null, svc("u"));
      cs.updateService(null, svc("t", { protocol: "TCP" }));
      cs.updateService(null, svc("s", { protocol: "SCTP" }));
    },
    newEps: [],
    deleted: [],
  },
  {
    name: "zero -> some (UDP, SCTP; not TCP)",
    act: (cs) => {
      cs.updateEndpointSlice(null, slice("u-1", "u", [ep("198.18.1.1"), ep("198.18.1.2")]));
      cs.updateEndpointSlice(null, slice("t-1", "t", [ep("198.18.1.1")], { protocol: "TCP" }));
      cs.updateEndpointSlice(null, slice("s-1", "s", [ep("198.18.1.1")], { protocol: "SCTP" }));
    },
    newEps: ["ns/s:p", "ns/u:p"],
    deleted: [],
  },
  {
    name: "some -> more is not zero -> some",
    act: (cs) =>
      cs.updateEndpointSlice(
        null,
        slice("u-1", "u", [ep("198.18.1.1"), ep("198.18.1.2"), ep("198.18.1.3")]),
      ),
    newEps: [],
    deleted: [],
  },
  {
    name: "endpoint removed",
    act: (cs) =>
      cs.updateEndpointSlice(null, slice("u-1", "u", [ep("198.18.1.1"), ep("198.18.1.3")])),
    newEps: [],
    deleted: ["ns/u:p>198.18.1.2:5353"],
  },
  {
    name: "terminating but still serving is kept",
    act: (cs) =>
      cs.updateEndpointSlice(
        null,
        slice("u-1", "u", [
          ep("198.18.1.1"),
          ep("198.18.1.3", { conditions: { ready: false, serving: true, terminating: true } }),
        ]),
      ),
    newEps: [],
    deleted: [],
  },
  {
    name: "stops serving",
    act: (cs) =>
      cs.updateEndpointSlice(
        null,
        slice("u-1", "u", [
          ep("198.18.1.1"),
          ep("198.18.1.3", { conditions: { ready: false, serving: false, terminating: true } }),
        ]),
      ),
    newEps: [],
    deleted: ["ns/u:p>198.18.1.3:5353"],
  },
  {
    name: "target port changes",
    act: (cs) =>
      cs.updateEndpointSlice(null, slice("u-1", "u", [ep("198.18.1.1")], { port: 5454 })),
    newEps: [],
    deleted: ["ns/u:p>198.18.1.1:5353"],
  },
  {
    name: "TCP endpoint removed: nothing",
    act: (cs) => cs.updateEndpointSlice(slice("t-1", "t", []), null),
    newEps: [],
    deleted: [],
  },
  {
    name: "scaled to zero",
    act: (cs) => cs.updateEndpointSlice(null, slice("s-1", "s", [])),
    newEps: [],
    deleted: ["ns/s:p>198.18.1.1:5353"],
  },
  {
    name: "UDP service deleted",
    act: (cs) => cs.updateService(svc("u"), null),
    newEps: [],
    deleted: ["ns/u:p>198.18.1.1:5454"],
  },
  {
    name: "service re-created with existing endpoints",
    act: (cs) => cs.updateService(null, svc("u")),
    newEps: ["ns/u:p"],
    deleted: [],
  },
  {
    name: "protocol TCP -> UDP counts as zero -> some",
    act: (cs) => {
      cs.updateEndpointSlice(null, slice("t-1", "t", [ep("198.18.1.1")], { protocol: "TCP" }));
      cs.updateEndpointSlice(null, slice("t-2", "t", [ep("198.18.1.1")], { protocol: "UDP" }));
    },
    newEps: [],
    deleted: [],
  },
  {
    name: "(switch)",
    act: (cs) => cs.updateService(svc("t", { protocol: "TCP" }), svc("t", { protocol: "UDP" })),
    newEps: ["ns/t:p"],
    deleted: [],
  },
];

Deno.test("apply: stale report for UDP/SCTP", () => {
  const { cs } = newState();
  const fmt = (r: ReturnType<ClusterState["apply"]>) => ({
    newEps: r.families[4].stale.servicesWithNewEndpoints.map((s) => s.id).sort(),
    deleted: r.families[4].stale.deletedEndpoints.map((d) => `${d.service.id}>${d.ip}:${d.port}`)
      .sort(),
  });
  for (const s of STALE_STEPS) {
    s.act(cs);
    assert.deepEqual(fmt(cs.apply()), { newEps: s.newEps, deleted: s.deleted }, s.name);
  }
});

Deno.test("apply: the stale report carries the service as it was", () => {
  const { cs } = newState();
  cs.updateService(null, svc("u", { ips: ["198.18.100.7"] }));
  cs.updateEndpointSlice(null, slice("u-1", "u", [ep("198.18.1.1")]));
  cs.apply();
  cs.updateService(svc("u", { ips: ["198.18.100.7"] }), null);
  const d = cs.apply().families[4].stale.deletedEndpoints;
  assert.equal(d.length, 1);
  assert.equal(d[0].service.clusterIP, "198.18.100.7");
});

Deno.test("apply: a deleted UDP service port is reported whole, scaled-to-zero or not", () => {
  const { cs } = newState();
  const deleted = (r: ReturnType<ClusterState["apply"]>) =>
    (r.families[4].stale.deletedServices ?? []).map((s) => `${s.id}@${s.clusterIP}`);
  cs.updateService(null, svc("u", { ips: ["198.18.100.7"] }));
  cs.updateService(null, svc("t", { ips: ["198.18.100.8"], protocol: "TCP" }));
  cs.updateService(null, svc("z", { ips: ["198.18.100.9"] }));
  cs.updateEndpointSlice(null, slice("u-1", "u", [ep("198.18.1.1")]));
  assert.deepEqual(deleted(cs.apply()), []);
  // Scaling to zero is not a deletion: the removed endpoint is reported instead.
  cs.updateEndpointSlice(slice("u-1", "u", [ep("198.18.1.1")]), null);
  let r = cs.apply();
  assert.deepEqual(deleted(r), []);
  assert.deepEqual(r.families[4].stale.deletedEndpoints.map((d) => d.ip), ["198.18.1.1"]);
  // Deleted with no endpoints at all (no deleted endpoint to go on), and a TCP one: only UDP.
  cs.updateService(svc("u", { ips: ["198.18.100.7"] }), null);
  cs.updateService(svc("t", { ips: ["198.18.100.8"], protocol: "TCP" }), null);
  assert.deepEqual(deleted(cs.apply()), ["ns/u:p@198.18.100.7"]);
  // A port that stops being UDP counts as a deleted UDP port.
  cs.updateService(
    svc("z", { ips: ["198.18.100.9"] }),
    svc("z", { ips: ["198.18.100.9"], protocol: "TCP" }),
  );
  assert.deepEqual(deleted(cs.apply()), ["ns/z:p@198.18.100.9"]);
  // Deleted and its ClusterIP taken by a new UDP service in the same sync: nothing to flush.
  cs.updateService(null, svc("v", { ips: ["198.18.100.10"] }));
  cs.apply();
  cs.updateService(svc("v", { ips: ["198.18.100.10"] }), null);
  cs.updateService(null, svc("w", { ips: ["198.18.100.10"] }));
  r = cs.apply();
  assert.deepEqual(deleted(r), []);
});
