/**
 * The partial changes behind tests/golden/<name>.changes.txt: after the cold
 * start of a golden cluster (golden_clusters.ts), endpoints come and go and
 * Services appear and disappear. Most of what these syncs send are element
 * changes, which production writes as raw netlink batches (golden_wire.ts).
 *
 * @module
 */
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../proxier/model.ts";
import { endpoint as ep, servicePort } from "../proxier/model_testing.ts";
import type { GoldenChange } from "./golden_wire.ts";

/** `state` with Service port `id`'s endpoints replaced. */
function setEndpoints(state: ProxyState, id: string, eps: EndpointInfo[]): ProxyState {
  return { ...state, endpoints: new Map(state.endpoints).set(id, eps) };
}

/** A change of Service port `id`'s endpoints (computed from the current ones). */
function endpoints(
  what: string,
  id: string,
  f: (eps: readonly EndpointInfo[]) => EndpointInfo[],
): GoldenChange {
  return {
    what,
    apply: (s) => ({ state: setEndpoints(s, id, f(s.endpoints.get(id) ?? [])), changed: [id] }),
  };
}

/** A new Service port with its endpoints. */
function added(what: string, svc: ServicePortInfo, eps: EndpointInfo[]): GoldenChange {
  return {
    what,
    apply: (s) => ({
      state: { ...setEndpoints(s, svc.id, eps), services: new Map(s.services).set(svc.id, svc) },
      changed: [svc.id],
    }),
  };
}

/** Service port `id` deleted. */
function deleted(what: string, id: string): GoldenChange {
  return {
    what,
    apply: (s) => {
      const services = new Map(s.services), eps = new Map(s.endpoints);
      services.delete(id);
      eps.delete(id);
      return { state: { ...s, services, endpoints: eps }, changed: [], deleted: [id] };
    },
  };
}

/** The changes applied after each cold start, by golden cluster name. */
export const GOLDEN_CHANGES: Record<string, GoldenChange[]> = {
  "basic-ipv4": [
    endpoints(
      "endpoint 198.18.131.6:8080 added to default/web:http",
      "default/web:http",
      (eps) => [...eps, ep("198.18.131.6", 8080)],
    ),
    endpoints(
      "endpoint 198.18.130.5:8080 removed from default/web:http",
      "default/web:http",
      (eps) => eps.filter((e) => e.ip !== "198.18.130.5"),
    ),
    endpoints(
      "kube-system/kube-dns:dns loses all its endpoints",
      "kube-system/kube-dns:dns",
      () => [],
    ),
    endpoints(
      "kube-system/kube-dns:dns gets an endpoint back",
      "kube-system/kube-dns:dns",
      () => [ep("198.18.130.2", 53)],
    ),
    added(
      "new Service default/api:http (198.19.0.40:80, NodePort 30100) with one endpoint",
      servicePort("default/api:http", {
        family: 4,
        clusterIP: "198.19.0.40",
        port: 80,
        nodePort: 30100,
      }),
      [ep("198.18.130.7", 8080)],
    ),
    deleted("Service default/idle:http deleted", "default/idle:http"),
    deleted("Service default/web:http deleted", "default/web:http"),
  ],
  "topology-ipv6": [
    endpoints(
      "endpoint [2001:db8:129::8]:9090 added to apps/api:grpc",
      "apps/api:grpc",
      (eps) => [...eps, ep("2001:db8:129::8", 9090, { isLocal: true, zoneHints: ["zone-a"] })],
    ),
    endpoints(
      "endpoint [2001:db8:131::5]:9090 (zone-b, unused on this zone-a node) removed from apps/api:grpc",
      "apps/api:grpc",
      (eps) => eps.filter((e) => e.ip !== "2001:db8:131::5"),
    ),
    endpoints("apps/agent:metrics loses all its endpoints", "apps/agent:metrics", () => []),
    added(
      "new Service apps/web:http ([2001:db8:ffff::13]:80) with one endpoint",
      servicePort("apps/web:http", { family: 6, clusterIP: "2001:db8:ffff::13", port: 80 }),
      [ep("2001:db8:130::9", 8080)],
    ),
    deleted("Service apps/draining:http deleted", "apps/draining:http"),
  ],
};
