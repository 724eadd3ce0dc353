/**
 * Whether the localhost NodePort proxy runs, and for which families (KEP-6032): only when
 * nodePortAddresses selects a loopback address (`localhost`, or a CIDR holding 127.0.0.1 or
 * ::1; `all` and the catch-all CIDRs do not count: net/nodeport_addresses.ts decides) and the
 * feature gate KubeProxyNFTablesLocalhostNodePorts is on.
 *
 * @module
 */
import {
  type LoopbackNodePorts,
  loopbackNodePorts,
  parseNodePortAddresses,
} from "../../net/nodeport_addresses.ts";
import { IP_FAMILIES, type IpFamily } from "../../net/family.ts";

/** The loopback addresses a nodePortAddresses setting selects; none for a setting that does not parse (the flags refuse it first). */
export function loopbackSelection(nodePortAddresses: readonly string[]): LoopbackNodePorts {
  try {
    return loopbackNodePorts(parseNodePortAddresses(nodePortAddresses));
  } catch {
    return { ipv4: false, ipv6: false };
  }
}

/** The families whose loopback address gets listeners: selected, gate on, and run by this node. */
export function localhostFamilies(
  selection: LoopbackNodePorts,
  gateOn: boolean,
  nodeFamilies: readonly IpFamily[],
): IpFamily[] {
  if (!gateOn) return [];
  return IP_FAMILIES.filter((f) =>
    nodeFamilies.includes(f) && (f === 4 ? selection.ipv4 : selection.ipv6)
  );
}

/** The loopback address a family's listeners bind. */
export function loopbackAddress(family: IpFamily): string {
  return family === 4 ? "127.0.0.1" : "::1";
}
