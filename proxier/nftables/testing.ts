/**
 * Fixtures shared by this folder's unit tests: one node, one config, and
 * builders for service ports and endpoints.
 *
 * @module
 */
import type { EndpointInfo, ProxierConfig, ProxyState, ServicePortInfo } from "../model.ts";
import { endpoint, servicePort } from "../model_testing.ts";
import { type BuildContext, buildContext } from "./context.ts";

/** ClusterCIDR detection, default bit, primary NodePort addresses. */
export const CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.128.0/17", "2001:db8:128::/48"] },
  nodePortAddresses: [],
};

/** An IPv4 TCP service port on ClusterIP 198.19.0.1:80. */
export const svc = (id: string, o: Partial<ServicePortInfo> = {}): ServicePortInfo =>
  servicePort(id, { family: 4, clusterIP: "198.19.0.1", ...o });

/** A ready remote endpoint on port 8080. */
export const ep = (ip: string, o: Partial<EndpointInfo> = {}): EndpointInfo =>
  endpoint(ip, 8080, o);

/** Node n1 (198.18.0.1, 2001:db8::1, podCIDR 198.18.129.0/24) with the given services. */
export function state(
  services: ServicePortInfo[] = [],
  eps: Record<string, EndpointInfo[]> = {},
): ProxyState {
  return {
    family: 4,
    services: new Map(services.map((s) => [s.id, s])),
    endpoints: new Map(Object.entries(eps)),
    node: {
      name: "n1",
      labels: {},
      ips: ["198.18.0.1", "2001:db8::1"],
      podCIDRs: ["198.18.129.0/24"],
    },
    serviceCIDRs: ["198.19.0.0/16", "198.20.0.0/24", "2001:db8:ffff::/112"],
  };
}

/** The IPv4 build context of {@link state} with {@link CFG}. */
export const ctx4 = (): BuildContext => buildContext(state(), CFG);

/**
 * A table dump (`MemoryNftables.dump()`) with each frontend's endpoint buckets sorted by value.
 * Buckets keep their positions across syncs (frontend.ts `stableBuckets`) while a fresh sync
 * places them in sorted order: both balance the same endpoints, so compare them this way.
 */
export function canonicalBuckets(dump: string): string {
  const lines = dump.split("\n");
  let inBuckets = false;
  let group: { key: string; at: number[]; values: string[] } | undefined;
  const flush = () => {
    if (group === undefined) return;
    const sorted = [...group.values].sort();
    group.at.forEach((at, i) => lines[at] = lines[at].replace(/ : .*?(,?)$/, ` : ${sorted[i]}$1`));
    group = undefined;
  };
  for (let i = 0; i < lines.length; i++) {
    const m = /^\tmap (\S+) \{$/.exec(lines[i]);
    if (m) inBuckets = /^(nodeport-)?endpoints-/.test(m[1]);
    const el = inBuckets ? /^\t\t\t(.*) \. \d+ : (.*?),?$/.exec(lines[i]) : null;
    if (el === null) {
      flush();
      continue;
    }
    if (group?.key !== el[1]) flush();
    group ??= { key: el[1], at: [], values: [] };
    group.at.push(i);
    group.values.push(el[2]);
  }
  flush();
  return lines.join("\n");
}
