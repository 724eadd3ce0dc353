import assert from "node:assert/strict";
import {
  identityOf,
  identityStub,
  slimEndpointSlice,
  slimNode,
  slimService,
  slimServiceCIDR,
} from "./slim.ts";
import { LABEL_SERVICE_NAME } from "../../proxier/k8s_types.ts";

Deno.test("slim: a Service keeps what the tracker reads, nothing else", () => {
  const svc = {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: "web",
      namespace: "ns",
      resourceVersion: "7",
      uid: "u",
      managedFields: [{}],
      labels: { app: "web", "service.kubernetes.io/service-proxy-name": "other" },
      annotations: { big: "x".repeat(1000) },
    },
    spec: {
      type: "LoadBalancer",
      clusterIP: "198.19.0.1",
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080, nodePort: 30080 }],
      selector: { app: "web" },
      externalTrafficPolicy: "Local",
    },
    status: { loadBalancer: { ingress: [{ ip: "198.18.100.1", ipMode: "VIP", ports: [] }] } },
  };
  assert.deepEqual(slimService(svc), {
    metadata: {
      name: "web",
      namespace: "ns",
      resourceVersion: "7",
      labels: { "service.kubernetes.io/service-proxy-name": "other" },
    },
    spec: {
      type: "LoadBalancer",
      clusterIP: "198.19.0.1",
      externalTrafficPolicy: "Local",
      ports: [{ name: "http", protocol: "TCP", port: 80, nodePort: 30080 }],
    },
    status: { loadBalancer: { ingress: [{ ip: "198.18.100.1", ipMode: "VIP" }] } },
  });
  // Malformed values pass through for the tracker to report.
  assert.equal(
    (slimService({ metadata: { name: "x" }, spec: { ports: "80" } }).spec as { ports: unknown })
      .ports,
    "80",
  );
});

Deno.test("slim: EndpointSlice, Node and ServiceCIDR", () => {
  const slice = slimEndpointSlice({
    metadata: {
      name: "web-1",
      namespace: "ns",
      labels: {
        "kubernetes.io/service-name": "web",
        "endpointslice.kubernetes.io/managed-by": "x",
      },
      annotations: {
        "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z",
        other: "y",
      },
    },
    addressType: "IPv4",
    endpoints: [{
      addresses: ["198.18.1.2"],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: "n1",
      targetRef: { kind: "Pod", name: "p" },
      hints: { forZones: [{ name: "a" }] },
    }],
    ports: [{ name: "http", protocol: "TCP", port: 8080, appProtocol: "http" }],
  });
  assert.deepEqual(slice.metadata, {
    name: "web-1",
    namespace: "ns",
    labels: { "kubernetes.io/service-name": "web" },
    annotations: { "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z" },
  });
  assert.deepEqual((slice.endpoints as object[])[0], {
    addresses: ["198.18.1.2"],
    conditions: { ready: true, serving: true, terminating: false },
    nodeName: "n1",
    targetRef: { kind: "Pod", name: "p" },
    hints: { forZones: [{ name: "a" }] },
  });
  const node = slimNode({
    metadata: {
      name: "n1",
      labels: { "topology.kubernetes.io/zone": "a" },
      deletionTimestamp: "t",
    },
    spec: { podCIDRs: ["198.18.1.0/24"], taints: [{ key: "k" }], providerID: "p" },
    status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }], images: [{}] },
  });
  assert.deepEqual(node, {
    metadata: {
      name: "n1",
      deletionTimestamp: "t",
      labels: { "topology.kubernetes.io/zone": "a" },
    },
    spec: { podCIDRs: ["198.18.1.0/24"], taints: [{ key: "k" }] },
    status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
  });
  assert.deepEqual(
    slimServiceCIDR({ metadata: { name: "k" }, spec: { cidrs: ["198.19.0.0/16"] }, status: {} }),
    {
      metadata: { name: "k" },
      spec: { cidrs: ["198.19.0.0/16"] },
    },
  );
});

Deno.test("slimEndpointSlice keeps of a targetRef only what tells two Pods apart", () => {
  const s = slimEndpointSlice({
    metadata: { name: "a", namespace: "ns" },
    endpoints: [
      {
        addresses: ["198.18.1.2"],
        targetRef: { kind: "Pod", namespace: "ns", name: "p", uid: "u-1", resourceVersion: "9" },
      },
      { addresses: ["198.18.1.3"], targetRef: { kind: "Pod", namespace: "ns", name: "q" } },
    ],
  });
  assert.deepEqual((s.endpoints as { targetRef: unknown }[]).map((e) => e.targetRef), [
    { uid: "u-1" },
    { kind: "Pod", namespace: "ns", name: "q" },
  ]);
});

Deno.test("identityStub: one string per object, unpacked into what identityOf keeps", () => {
  const objs: Record<string, unknown>[] = [
    { metadata: { namespace: "ns", name: "web", resourceVersion: "42", labels: { a: "b" } } },
    {
      metadata: {
        namespace: "ns",
        name: "web-x1",
        resourceVersion: "7",
        labels: { [LABEL_SERVICE_NAME]: "web", other: "x" },
      },
      endpoints: [],
    },
    { metadata: { namespace: "ns", name: "nover" } },
  ];
  for (const o of objs) {
    const m = o.metadata as { namespace: string; name: string };
    const packed = identityStub.pack(o);
    assert.equal(typeof packed, "string");
    assert.deepEqual(identityStub.unpack(`${m.namespace}/${m.name}`, packed), identityOf(o));
    assert.equal(
      identityStub.version(packed),
      (o.metadata as { resourceVersion?: string }).resourceVersion,
    );
  }
});
