/**
 * What the fake API server serves: its object type, the resources it knows and where they
 * live, and the Status bodies it answers with (tests/fakeapi/server.ts).
 * @module
 */

/** A Kubernetes object as JSON. */
export interface KObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
    resourceVersion?: string;
    uid?: string;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

/** Where a kind lives in the API. */
export interface ResourceInfo {
  plural: string;
  kind: string;
  apiVersion: string;
  namespaced: boolean;
  prefix: string;
}

/** The resources this server knows, by kind. */
export const RESOURCES: Record<string, ResourceInfo> = {
  Service: {
    plural: "services",
    kind: "Service",
    apiVersion: "v1",
    namespaced: true,
    prefix: "/api/v1",
  },
  Node: { plural: "nodes", kind: "Node", apiVersion: "v1", namespaced: false, prefix: "/api/v1" },
  EndpointSlice: {
    plural: "endpointslices",
    kind: "EndpointSlice",
    apiVersion: "discovery.k8s.io/v1",
    namespaced: true,
    prefix: "/apis/discovery.k8s.io/v1",
  },
  ServiceCIDR: {
    plural: "servicecidrs",
    kind: "ServiceCIDR",
    apiVersion: "networking.k8s.io/v1",
    namespaced: false,
    prefix: "/apis/networking.k8s.io/v1",
  },
};

/** A Status response, as the real server sends with an error code. */
export function status(code: number, reason: string, message: string): Response {
  return new Response(
    JSON.stringify({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message,
      reason,
      code,
    }),
    { status: code, headers: { "content-type": "application/json" } },
  );
}

/** What the real server answers a request for a version it has not reached (after ~3 s). */
export function tooLarge(asked: number, current: number): Response {
  return Response.json({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: `Too large resource version: ${asked}, current: ${current}`,
    reason: "Timeout",
    details: {
      causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
      retryAfterSeconds: 1,
    },
    code: 504,
  }, { status: 504 });
}

/** A kubeconfig (YAML) pointing at `url` over plain HTTP. */
export function kubeconfigFor(url: string): string {
  // client-node 2.x refuses plain http unless the cluster skips TLS verification.
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: fake",
    "  cluster:",
    `    server: ${url}`,
    "    insecure-skip-tls-verify: true",
    "users:",
    "- name: fake",
    "  user:",
    "    token: fake-token",
    "contexts:",
    "- name: fake",
    "  context:",
    "    cluster: fake",
    "    user: fake",
    "current-context: fake",
    "",
  ].join("\n");
}
