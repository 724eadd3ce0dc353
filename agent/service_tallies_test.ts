import assert from "node:assert/strict";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../proxier/model.ts";
import { endpoint, servicePort } from "../proxier/model_testing.ts";
import { ServiceTallies } from "./service_tallies.ts";

function st(services: ServicePortInfo[], eps: Record<string, EndpointInfo[]>): ProxyState {
  return {
    family: 4,
    services: new Map(services.map((s) => [s.id, s])),
    endpoints: new Map(Object.entries(eps)),
    node: { name: "n1", labels: {}, ips: ["198.18.0.1"], podCIDRs: [] },
    serviceCIDRs: [],
  };
}

const local = (ip: string, o: Partial<EndpointInfo> = {}) =>
  endpoint(ip, 80, { isLocal: true, ...o });
const remote = (ip: string) => endpoint(ip, 80, { isLocal: false });

Deno.test("ServiceTallies: counts follow the changed ids only, and a full update recounts", () => {
  const a = servicePort("ns/a:http", {
    family: 4,
    externalPolicyLocal: true,
    healthCheckNodePort: 31000,
  });
  const b = servicePort("ns/b:http", { family: 4, internalPolicyLocal: true });
  const c = servicePort("ns/c:http", { family: 4 });
  const s = st([a, b, c], {
    [a.id]: [remote("198.18.9.1")],
    [b.id]: [remote("198.18.9.2")],
    [c.id]: [remote("198.18.9.3")],
  });
  const t = new ServiceTallies();
  t.update(s);
  assert.deepEqual([t.internal, t.external], [1, 1]);
  let h = t.takeHealth();
  assert.equal(h.changed, true);
  assert.deepEqual([...h.entries], [{ port: 31000, service: "ns/a", localEndpoints: 0 }]);
  assert.equal(t.takeHealth().changed, false);

  // a gains a local endpoint: only its id is updated.
  (s.endpoints as Map<string, EndpointInfo[]>).set(a.id, [local("198.18.129.1")]);
  t.update(s, [a.id]);
  assert.deepEqual([t.internal, t.external], [1, 0]);
  h = t.takeHealth();
  assert.equal(h.changed, true);
  assert.deepEqual([...h.entries], [{ port: 31000, service: "ns/a", localEndpoints: 1 }]);

  // b deleted: its count goes; an id not changed is not looked at.
  (s.services as Map<string, ServicePortInfo>).delete(b.id);
  t.update(s, [b.id]);
  assert.deepEqual([t.internal, t.external], [0, 0]);
  assert.equal(t.takeHealth().changed, false);

  // A terminating local endpoint that still serves counts as local for the gauge (not health).
  (s.endpoints as Map<string, EndpointInfo[]>).set(a.id, [
    local("198.18.129.1", { ready: false, serving: true, terminating: true }),
  ]);
  t.update(s);
  assert.deepEqual([t.internal, t.external], [0, 0]);
  assert.deepEqual([...t.takeHealth().entries], [{
    port: 31000,
    service: "ns/a",
    localEndpoints: 0,
  }]);
});
