/**
 * The kube-proxy 1.34 nftables layout for a synthetic cluster, for
 * comparison: per service a chain that picks an endpoint with
 * `numgen random mod N vmap { 0 : goto endpoint-A, ... }` (an anonymous map
 * per service), and per endpoint a chain doing the masquerade mark and the
 * dnat. Rendered as a Transaction (nft script text) and applied with
 * libnftables in ONE transaction, as upstream does on a full sync.
 *
 * Runs INSIDE a test network namespace only (KNP_IN_TEST_NETNS=1).
 * Usage: deno run -A tests/bench/upstream_layout.ts --services 1000 --eps 10
 *
 * @module
 */
import { openNftables } from "../../ffi/nftables/client.ts";
import { Transaction } from "../../ffi/nftables/types.ts";
import type { MutableState } from "./synthetic.ts";
import { syntheticState } from "./synthetic.ts";
import { requireTestNetns } from "./sync_bench.ts";
import { hash8 } from "../../proxier/nftables/names.ts";

/** Renders the upstream 1.34 shape of `state` as one transaction. */
export function upstreamTransaction(state: MutableState, podCIDR = "198.19.0.0/16"): Transaction {
  const tx = new Transaction();
  tx.add({ kind: "table", comment: "rules for kube-proxy" });
  tx.add({
    kind: "map",
    name: "service-ips",
    type: "ipv4_addr . inet_proto . inet_service",
    dataType: "verdict",
  });
  tx.add({
    kind: "chain",
    name: "nat-prerouting",
    type: "nat",
    hook: "prerouting",
    priority: -100,
  });
  tx.add({ kind: "chain", name: "services" });
  tx.add({ kind: "chain", name: "mark-for-masquerade" });
  tx.add({ kind: "rule", chain: "mark-for-masquerade", rule: "mark set mark or 0x4000" });
  tx.add({ kind: "rule", chain: "nat-prerouting", rule: "jump services" });
  tx.add({
    kind: "rule",
    chain: "services",
    rule: "ip daddr . meta l4proto . th dport vmap @service-ips",
  });
  const elements: Transaction["ops"] = [];
  for (const [id, svc] of state.services) {
    const proto = svc.protocol.toLowerCase();
    const base = `${svc.namespace}/${svc.name}/${proto}/${svc.portName}`;
    const svcChain = `service-${hash8(base)}-${base}`;
    const eps = state.endpoints.get(id) ?? [];
    if (eps.length === 0) continue;
    const epChains = eps.map((ep) => {
      const n = `${base}__${ep.ip}/${ep.port}`;
      return `endpoint-${hash8(n)}-${n}`;
    });
    tx.add({ kind: "chain", name: svcChain });
    eps.forEach((ep, i) => {
      tx.add({ kind: "chain", name: epChains[i] });
      tx.add({
        kind: "rule",
        chain: epChains[i],
        rule: `ip saddr ${ep.ip} jump mark-for-masquerade`,
      });
      tx.add({
        kind: "rule",
        chain: epChains[i],
        rule: `meta l4proto ${proto} dnat to ${ep.ip}:${ep.port}`,
      });
    });
    tx.add({
      kind: "rule",
      chain: svcChain,
      rule: `ip daddr ${svc.clusterIP} ip saddr != ${podCIDR} jump mark-for-masquerade`,
    });
    const vmap = epChains.map((c, i) => `${i} : goto ${c}`).join(" , ");
    tx.add({
      kind: "rule",
      chain: svcChain,
      rule: `numgen random mod ${eps.length} vmap { ${vmap} }`,
    });
    elements.push({
      verb: "add",
      obj: {
        kind: "element",
        map: "service-ips",
        key: [svc.clusterIP, proto, String(svc.port)],
        value: [`goto ${svcChain}`],
      },
    });
  }
  for (const op of elements) tx.ops.push(op);
  return tx;
}

/** Applies the upstream layout for a cluster size and prints one JSON line. */
export async function benchUpstream(
  services: number,
  eps: number,
): Promise<Record<string, unknown>> {
  requireTestNetns();
  const state = syntheticState({ services, endpointsPerService: eps });
  const tx = upstreamTransaction(state);
  const client = openNftables("ip", "kube-proxy");
  const t0 = performance.now();
  await client.run(tx);
  const line = {
    bench: "upstream-cold",
    services,
    eps,
    seconds: (performance.now() - t0) / 1000,
    ops: tx.size,
  };
  console.log(JSON.stringify(line));
  client.close();
  return line;
}

if (import.meta.main) {
  const get = (name: string, def: number) => {
    const i = Deno.args.indexOf(`--${name}`);
    return i < 0 ? def : Number(Deno.args[i + 1]);
  };
  await benchUpstream(get("services", 1000), get("eps", 10));
}
