/**
 * kubeproxy_nftables_localhost_nodeport_rejected_packets_total{ip_family,protocol}: read at each
 * scrape from the named nftables counters the reject rules update (proxier/nftables/localhost.ts),
 * as upstream's collector reads its counters. A family whose table or counter is missing (before
 * the first sync) reports nothing.
 *
 * @module
 */
import { Counter, type Registry } from "../../net/prometheus.ts";
import { LOCALHOST_REJECTED, localhostRejectedCounter } from "../../proxier/nftables/localhost.ts";
import type { NftablesClient } from "../../ffi/nftables/types.ts";
import { familyLabel, type IpFamily } from "../../net/family.ts";

/** The metric's name, as upstream's. */
export const REJECTED_PACKETS = "kubeproxy_nftables_localhost_nodeport_rejected_packets_total";

/** Registers the metric on `registry`, reading the counters of `families` through `clients`. */
export function registerRejectedPackets(
  registry: Registry,
  clients: Partial<Record<IpFamily, NftablesClient>>,
  families: readonly IpFamily[],
): Counter<"ip_family" | "protocol"> {
  return new Counter({
    name: REJECTED_PACKETS,
    help: "Number of packets rejected on localhost NodePorts. UDP and SCTP are always rejected " +
      "while the localhost NodePort proxy serves the family",
    labelNames: ["ip_family", "protocol"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const f of families) {
        const read = clients[f]?.counterPackets?.bind(clients[f]);
        if (!read) continue;
        for (const [proto, label] of LOCALHOST_REJECTED) {
          const v = await read(localhostRejectedCounter(proto)).catch(() => undefined);
          if (v !== undefined) this.inc({ ip_family: familyLabel(f), protocol: label }, v);
        }
      }
    },
  });
}
