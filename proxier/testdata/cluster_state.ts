/**
 * The ClusterState tests' objects and state (cluster_state_test.ts, cluster_state_stale_test.ts,
 * cluster_state_node_test.ts).
 */
import type { Endpoint, EndpointSlice, V1Node, V1Service } from "../k8s_types.ts";
import { ClusterState, type ClusterStateOptions } from "../cluster_state.ts";

/** A log function that keeps its lines, and the lines. */
export function captureLog(): {
  lines: { level: string; msg: string; fields?: Record<string, unknown> }[];
  log: (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;
} {
  const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const log = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => {
    lines.push({ level, msg, fields });
  };
  return { lines, log };
}

/** A ClusterState for node "me" with a captured log. */
export function newState(
  opts: Partial<ClusterStateOptions> = {},
): { cs: ClusterState; lines: ReturnType<typeof captureLog>["lines"] } {
  const c = captureLog();
  return { cs: new ClusterState({ nodeName: "me", log: c.log, ...opts }), lines: c.lines };
}

/** A Service in namespace ns (UDP port p 53 on 198.18.100.1 unless told). */
export function svc(
  name: string,
  opts: {
    protocol?: string;
    ips?: string[];
    ports?: { name: string; port: number; protocol?: string }[];
  } = {},
): V1Service {
  const ips = opts.ips ?? ["198.18.100.1"];
  return {
    metadata: { namespace: "ns", name },
    spec: {
      type: "ClusterIP",
      clusterIP: ips[0],
      clusterIPs: ips,
      ports: (opts.ports ?? [{ name: "p", port: 53 }]).map((p) => ({
        protocol: opts.protocol ?? "UDP",
        ...p,
      })),
    },
  };
}

/** An endpoint with one address. */
export const ep = (ip: string, extra: Partial<Endpoint> = {}): Endpoint => ({
  addresses: [ip],
  ...extra,
});

/** An EndpointSlice of `service` (UDP port p 5353, IPv4 unless told). */
export function slice(
  name: string,
  service: string,
  endpoints: Endpoint[],
  opts: { protocol?: string; port?: number; portName?: string; addressType?: string } = {},
): EndpointSlice {
  return {
    metadata: { namespace: "ns", name, labels: { "kubernetes.io/service-name": service } },
    addressType: opts.addressType ?? "IPv4",
    endpoints,
    ports: [{
      name: opts.portName ?? "p",
      protocol: opts.protocol ?? "UDP",
      port: opts.port ?? 5353,
    }],
  };
}

/** This node ("me") with its addresses and pod CIDRs. */
export function node(labels: Record<string, string>, extra: Partial<V1Node> = {}): V1Node {
  return {
    metadata: { name: "me", labels },
    spec: { podCIDRs: ["198.18.64.0/24", "2001:db8:64::/64"] },
    status: {
      addresses: [
        { type: "Hostname", address: "me" },
        { type: "ExternalIP", address: "198.18.8.8" },
        { type: "InternalIP", address: "198.18.0.10" },
        { type: "InternalIP", address: "198.18.0.11" },
        { type: "InternalIP", address: "2001:db8::10" },
      ],
    },
    ...extra,
  };
}

/** A set's members, sorted. */
export const ids = (s: Set<string>): string[] => [...s].sort();
