/**
 * Rules for localhost NodePorts (KEP-6032). TCP to 127.0.0.1 / ::1 is served by the agent's
 * userspace proxy (agent/localhost/); UDP and SCTP cannot be, so packets to a loopback NodePort
 * of those protocols are rejected, each protocol counted by a named counter that the metric
 * kubeproxy_nftables_localhost_nodeport_rejected_packets_total reads. The rules exist only while
 * the proxy serves the family (nodePortAddresses selects its loopback address and the feature
 * gate is on). Upstream's nftables rules for this are not in the stored source (only its
 * metric's test is), so the shape is ours: one chain, jumped to from nat-output for packets to
 * the loopback address, a rule per protocol and NodePort map. Why nat-output and not a filter
 * chain: a rule that looks up service-nodeports binds a verdict map whose chains DNAT, and the
 * kernel validates those chains against the binding chain's type (EOPNOTSUPP in a filter chain);
 * `reject` itself is valid at the output hook of any chain type. The nat chain sees every packet
 * here: a rejected first packet never confirms its conntrack entry, so the next is new again.
 *
 * @module
 */
import type { BuildContext } from "./context.ts";
import { FIXED } from "./names.ts";
import type { Chain } from "../../ffi/nftables/types.ts";

/** The chain holding the reject rules. */
export const LOCALHOST_CHAIN = "localhost-nodeports-check";

/** Protocols rejected on loopback NodePorts, with their counters' labels. */
export const LOCALHOST_REJECTED = [["udp", "UDP"], ["sctp", "SCTP"]] as const;

/** The named counter of rejected packets of `proto` (lower case). */
export function localhostRejectedCounter(proto: "udp" | "sctp"): string {
  return `localhost-nodeport-rejected-${proto}`;
}

/** The loopback address of the context's family. */
function loopback(ctx: BuildContext): string {
  return ctx.ip === "ip" ? "127.0.0.1" : "::1";
}

/** The rule nat-output gets first: packets to the loopback address go through the check. */
export function localhostJump(ctx: BuildContext): string {
  return `${ctx.ip} daddr ${loopback(ctx)} jump ${LOCALHOST_CHAIN}`;
}

/**
 * The check chain with its counters: UDP and SCTP to a NodePort (served or not) are rejected.
 * The NodePorts are those of the dispatch maps and of the class sets `classSets` (each with its
 * protocol). (A skeleton ChainSpec; typed here without importing skeleton.ts, which imports this.)
 */
export function localhostChain(
  classSets: readonly { proto: string; set: string }[],
): { chain: Chain; rules: string[]; counters: string[] } {
  const rules: string[] = [];
  for (const [proto] of LOCALHOST_REJECTED) {
    const sets = classSets.filter((c) => c.proto === proto).map((c) => c.set);
    for (const map of [FIXED.serviceNodePorts, FIXED.noEndpointNodePorts, ...sets]) {
      rules.push(
        // As nft lists it (`udp dport` implies the protocol), so a listing reads back the same.
        `meta l4proto . ${proto} dport @${map} ` +
          `counter name "${localhostRejectedCounter(proto)}" reject`,
      );
    }
  }
  return {
    chain: { kind: "chain", name: LOCALHOST_CHAIN },
    rules,
    counters: LOCALHOST_REJECTED.map(([proto]) => localhostRejectedCounter(proto)),
  };
}
