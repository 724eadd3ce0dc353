/**
 * Whether the localhost NodePort proxy runs, and for which families (KEP-6032): only when
 * nodePortAddresses selects a loopback address (`localhost`, or a CIDR holding 127.0.0.1 or
 * ::1; `all` and the catch-all CIDRs do not count) and the feature gate
 * KubeProxyNFTablesLocalhostNodePorts is on.
 *
 * @module
 */
import { cidrContains, parseCIDR } from "../../net/cidr.ts";
import { parseIP } from "../../net/ip.ts";
import { IP_FAMILIES, type IpFamily } from "../../net/family.ts";

/**
 * Which loopback addresses nodePortAddresses selects (the shape of net/nodeport_addresses.ts's
 * LoopbackNodePorts, which replaces {@link loopbackSelection} once it lands).
 */
export interface LoopbackSelection {
  /** 127.0.0.1 is selected. */
  ipv4: boolean;
  /** ::1 is selected. */
  ipv6: boolean;
}

/**
 * The loopback addresses that nodePortAddresses selects: the keyword `localhost` selects both;
 * a CIDR selects the one it holds, unless its prefix is 0 (a catch-all, like `all`, does not
 * ask for localhost explicitly, as upstream's KEP reads it).
 */
export function loopbackSelection(nodePortAddresses: readonly string[]): LoopbackSelection {
  const out: LoopbackSelection = { ipv4: false, ipv6: false };
  for (const entry of nodePortAddresses) {
    if (entry === "localhost") {
      out.ipv4 = out.ipv6 = true;
      continue;
    }
    const c = parseCIDR(entry);
    if (!c || c.prefix === 0) continue;
    if (c.family === 4 && cidrContains(c, parseIP("127.0.0.1")!)) out.ipv4 = true;
    if (c.family === 6 && cidrContains(c, parseIP("::1")!)) out.ipv6 = true;
  }
  return out;
}

/** The families whose loopback address gets listeners: selected, gate on, and run by this node. */
export function localhostFamilies(
  selection: LoopbackSelection,
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
