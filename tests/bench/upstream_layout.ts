/**
 * The kube-proxy 1.34 nftables layout for a synthetic cluster, for
 * comparison: per service a chain that picks an endpoint with
 * `numgen random mod N vmap { 0 : goto endpoint-A, ... }` (an anonymous map
 * per service), and per endpoint a chain doing the masquerade mark and the
 * dnat. Rendered as a Transaction (nft script text) and applied with
 * libnftables in ONE transaction, as upstream does on a full sync. Then ten
 * one-endpoint changes, each written as upstream's partial sync writes it
 * (`upstream-endpoint-change`: change → commit, p50 / p99 / max).
 *
 * Runs INSIDE a test network namespace only (KNP_IN_TEST_NETNS=1).
 * Usage: deno run -A tests/bench/upstream_layout.ts --services 1000 --eps 10
 *
 * @module
 */
import { openNftables } from "../../ffi/nftables/client.ts";
import { Transaction } from "../../ffi/nftables/types.ts";
import type { MutableState } from "../support/synthetic.ts";
import { syntheticService, syntheticState } from "../support/synthetic.ts";
import { requireTestNetns } from "./sync_bench.ts";
import { hash8 } from "../../proxier/nftables/names.ts";
import type { EndpointInfo, ServicePortInfo } from "../../proxier/model.ts";

type Svc = ServicePortInfo;
type Ep = Pick<EndpointInfo, "ip" | "port">;

function baseName(svc: Svc): string {
  return `${svc.namespace}/${svc.name}/${svc.protocol.toLowerCase()}/${svc.portName}`;
}

function serviceChain(svc: Svc): string {
  const base = baseName(svc);
  return `service-${hash8(base)}-${base}`;
}

function endpointChain(svc: Svc, ep: Ep): string {
  const n = `${baseName(svc)}__${ep.ip}/${ep.port}`;
  return `endpoint-${hash8(n)}-${n}`;
}

/** An endpoint's chain: the hairpin masquerade mark and the dnat. */
function addEndpointChain(tx: Transaction, svc: Svc, ep: Ep): void {
  const chain = endpointChain(svc, ep);
  tx.add({ kind: "chain", name: chain });
  tx.add({ kind: "rule", chain, rule: `ip saddr ${ep.ip} jump mark-for-masquerade` });
  tx.add({
    kind: "rule",
    chain,
    rule: `meta l4proto ${svc.protocol.toLowerCase()} dnat to ${ep.ip}:${ep.port}`,
  });
}

/** A Service chain's rules: masquerade off-cluster sources, then pick an endpoint chain. */
function addServiceRules(tx: Transaction, svc: Svc, eps: readonly Ep[], podCIDR: string): void {
  const chain = serviceChain(svc);
  tx.add({
    kind: "rule",
    chain,
    rule: `ip daddr ${svc.clusterIP} ip saddr != ${podCIDR} jump mark-for-masquerade`,
  });
  const vmap = eps.map((ep, i) => `${i} : goto ${endpointChain(svc, ep)}`).join(" , ");
  tx.add({ kind: "rule", chain, rule: `numgen random mod ${eps.length} vmap { ${vmap} }` });
}

/**
 * One endpoint replaced in one Service, as upstream's partial sync writes it: the Service chain
 * flushed and rewritten, the new endpoint's chain added, the old one flushed and deleted.
 */
export function upstreamEndpointChange(
  svc: Svc,
  before: readonly Ep[],
  after: readonly Ep[],
  podCIDR = "198.19.0.0/16",
): Transaction {
  const tx = new Transaction();
  const kept = new Set(after.map((ep) => endpointChain(svc, ep)));
  const had = new Set(before.map((ep) => endpointChain(svc, ep)));
  for (const ep of after) if (!had.has(endpointChain(svc, ep))) addEndpointChain(tx, svc, ep);
  tx.flush({ kind: "chain", name: serviceChain(svc) });
  addServiceRules(tx, svc, after, podCIDR);
  for (const ep of before) {
    const chain = endpointChain(svc, ep);
    if (kept.has(chain)) continue;
    tx.flush({ kind: "chain", name: chain });
    tx.delete({ kind: "chain", name: chain });
  }
  return tx;
}

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
    const svcChain = serviceChain(svc);
    const eps = state.endpoints.get(id) ?? [];
    if (eps.length === 0) continue;
    tx.add({ kind: "chain", name: svcChain });
    for (const ep of eps) addEndpointChain(tx, svc, ep);
    addServiceRules(tx, svc, eps, podCIDR);
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
  console.log(JSON.stringify(await endpointChanges(client, state, services, eps)));
  client.close();
  return line;
}

const CHANGES = 10;

/** Times `CHANGES` one-endpoint changes, each its own transaction (change → commit). */
async function endpointChanges(
  client: ReturnType<typeof openNftables>,
  state: MutableState,
  services: number,
  eps: number,
): Promise<Record<string, unknown>> {
  const ms: number[] = [];
  let ops = 0;
  for (let k = 0; k < CHANGES; k++) {
    const i = Math.floor(((k + 0.5) * services) / CHANGES);
    const svc = syntheticService(i, { services, endpointsPerService: eps });
    const before = state.endpoints.get(svc.id) ?? [];
    const after = [{ ...before[0], ip: `198.19.255.${10 + k}` }, ...before.slice(1)];
    const tx = upstreamEndpointChange(svc, before, after);
    const t0 = performance.now();
    await client.run(tx);
    ms.push(performance.now() - t0);
    ops = tx.size;
  }
  const sorted = [...ms].sort((a, b) => a - b);
  const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  const r = (x: number) => Math.round(x * 10) / 10;
  return {
    bench: "upstream-endpoint-change",
    services,
    eps,
    p50ms: r(q(0.5)),
    p99ms: r(q(0.99)),
    maxms: r(sorted[sorted.length - 1]),
    n: ms.length,
    ops,
  };
}

if (import.meta.main) {
  const get = (name: string, def: number) => {
    const i = Deno.args.indexOf(`--${name}`);
    return i < 0 ? def : Number(Deno.args[i + 1]);
  };
  await benchUpstream(get("services", 1000), get("eps", 10));
}
