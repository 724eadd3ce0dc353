/**
 * Builders of model objects for tests: one place that knows every field, so
 * a new field in the model changes one file, not every test.
 *
 * @module
 */
import { familyOfText } from "../net/family.ts";
import type { EndpointInfo, ServicePortInfo } from "./model.ts";

/**
 * A TCP service port on port 80 with no extras. `id` is `ns/name:port`; the
 * namespace, name and port name are taken from it. The family follows
 * `clusterIP` when it is given.
 */
export function servicePort(id: string, o: Partial<ServicePortInfo> = {}): ServicePortInfo {
  const [nsName, portName = ""] = id.split(":");
  const [namespace, name = nsName] = nsName.includes("/") ? nsName.split("/") : ["ns", nsName];
  return {
    id,
    namespace,
    name,
    portName,
    protocol: "TCP",
    family: familyOfText(o.clusterIP ?? ""),
    clusterIP: "",
    port: 80,
    nodePort: 0,
    externalIPs: [],
    loadBalancerIPs: [],
    loadBalancerSourceRanges: [],
    stickyMaxAgeSeconds: 0,
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
    ...o,
  };
}

/** A ready, serving, remote endpoint. */
export function endpoint(ip: string, port: number, o: Partial<EndpointInfo> = {}): EndpointInfo {
  return { ip, port, ready: true, serving: true, terminating: false, isLocal: false, ...o };
}
