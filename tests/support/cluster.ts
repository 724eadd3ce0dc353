/**
 * The cluster the end-to-end benchmark serves: N Services × E ready endpoints as Kubernetes
 * objects for the fake API server, and the changes it makes while measuring.
 *
 * Address plan (only 198.18.0.0/15): ClusterIPs from 198.19.0.0/16 (the ServiceCIDR), endpoint
 * addresses from 198.18.128.0/17, which the backend namespace answers on every address (AnyIP),
 * and 198.18.255.0/24 kept free for the endpoints the benchmark's measured changes bring in.
 *
 * Shared test support: tests/bench/agent and the e2e drivers that need a cluster at scale
 * (crash_sync, image) both build theirs here.
 *
 * @module
 */
import type { KObject } from "../fakeapi/server.ts";

/** The node the agent runs as. */
export const NODE_NAME = "bench-node";
/** The ServiceCIDR. */
export const SERVICE_CIDR = "198.19.0.0/16";
/** Every endpoint address lies here; the backend namespace owns it. */
export const ENDPOINT_PREFIX = "198.18.128.0/17";
/** The backends' TCP port (each Service's targetPort). */
export const TARGET_PORT = 8080;
/** The Services' port. */
export const SERVICE_PORT = 80;
/** NodePorts are given to the first services, one in every {@link NODEPORT_EVERY}. */
const NODEPORT_EVERY = 20;
const NODEPORT_FIRST = 30000, NODEPORT_COUNT = 2700;

const POOL = 32_000; // addresses used for bulk endpoints: 198.18.128.1 - 198.18.253.x

/** ClusterIP of service `i` (0-based; up to 65k). */
export function clusterIP(i: number): string {
  const n = i + 1;
  return `198.19.${n >> 8}.${n & 255}`;
}

/** The address of bulk endpoint number `k` (reused round-robin past the pool's size). */
export function endpointIP(k: number): string {
  const n = (k % POOL) + 1;
  return `198.18.${128 + (n >> 8)}.${n & 255}`;
}

/** A fresh endpoint address for measured change number `k` (198.18.255.1 - .254). */
export function freshIP(k: number): string {
  return `198.18.255.${(k % 254) + 1}`;
}

/** Name and namespace of service `i`. */
export function serviceName(i: number): { namespace: string; name: string } {
  return { namespace: `ns${i % 100}`, name: `svc-${i}` };
}

/** Service `i`: ClusterIP, or NodePort for one in {@link NODEPORT_EVERY} while ports last. */
export function service(i: number, ip = clusterIP(i)): KObject {
  const { namespace, name } = serviceName(i);
  const np = i % NODEPORT_EVERY === 0 && i / NODEPORT_EVERY < NODEPORT_COUNT;
  const port: Record<string, unknown> = {
    name: "p",
    protocol: "TCP",
    port: SERVICE_PORT,
    targetPort: TARGET_PORT,
  };
  if (np) port.nodePort = NODEPORT_FIRST + i / NODEPORT_EVERY;
  return {
    kind: "Service",
    metadata: { name, namespace, uid: `uid-${i}` },
    spec: {
      type: np ? "NodePort" : "ClusterIP",
      clusterIP: ip,
      clusterIPs: [ip],
      ipFamilies: ["IPv4"],
      ports: [port],
    },
  };
}

/** One endpoint of a slice. */
export interface Ep {
  ip: string;
  ready?: boolean;
  /** Defaults to `ready` (a terminating pod still serving sets it true, ready false). */
  serving?: boolean;
  terminating?: boolean;
}

/** The EndpointSlice of service `i` with `eps` (its only one, named `<service>-abcde`). */
export function slice(i: number, eps: Ep[]): KObject {
  return sliceNamed(i, eps, "abcde");
}

/**
 * An EndpointSlice `<service>-<suffix>` of service `i` with `eps`: one of several slices of a
 * Service (the big-Deployment phase of the benchmark spreads one Service over 50).
 */
export function sliceNamed(i: number, eps: Ep[], suffix: string): KObject {
  const { namespace, name } = serviceName(i);
  return {
    kind: "EndpointSlice",
    metadata: {
      name: `${name}-${suffix}`,
      namespace,
      labels: {
        "kubernetes.io/service-name": name,
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
      },
      annotations: {
        "endpoints.kubernetes.io/last-change-trigger-time": new Date().toISOString(),
      },
    },
    addressType: "IPv4",
    ports: [{ name: "p", protocol: "TCP", port: TARGET_PORT }],
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      conditions: {
        ready: e.ready ?? true,
        serving: e.serving ?? e.ready ?? true,
        terminating: e.terminating ?? false,
      },
      nodeName: `node-${e.ip.split(".")[3]}`,
      targetRef: { kind: "Pod", namespace, name: `${name}-pod-${e.ip.replaceAll(".", "-")}` },
    })),
  };
}

/** The `e` ready bulk endpoints of service `i`. */
export function initialEndpoints(i: number, e: number): Ep[] {
  return Array.from({ length: e }, (_, j) => ({ ip: endpointIP(i * e + j) }));
}

/** The Node object. */
export function node(): KObject {
  return {
    kind: "Node",
    metadata: { name: NODE_NAME, labels: { "kubernetes.io/hostname": NODE_NAME } },
    spec: { podCIDRs: ["198.18.1.0/24"] },
    status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
  };
}

/** The ServiceCIDR object. */
export function serviceCIDR(): KObject {
  return {
    kind: "ServiceCIDR",
    metadata: { name: "kubernetes" },
    spec: { cidrs: [SERVICE_CIDR] },
  };
}

/**
 * One step of a rolling update of a slice, as a Deployment rollout shows it: the oldest
 * endpoint turns terminating, then is gone, and a new ready one takes its place. `step` picks
 * which of the two writes this is. Returns the new endpoint list.
 */
export function rollingStep(eps: Ep[], step: number, next: () => string): Ep[] {
  if (eps.length === 0) return [{ ip: next() }];
  const term = eps.findIndex((e) => e.terminating);
  if (term >= 0) {
    // The terminating one is gone; its replacement is ready.
    const out = eps.filter((_, k) => k !== term);
    out.push({ ip: next() });
    return out;
  }
  const k = step % eps.length;
  return eps.map((e, j) => j === k ? { ...e, ready: false, terminating: true } : e);
}
