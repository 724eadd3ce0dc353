/**
 * The cluster as `trace --dry-run` / `explain --dry-run` see it: read once
 * from a file of API objects (YAML documents or a JSON List), or listed once
 * from the API server through the agent's own informers, then programmed
 * into an in-memory table through a real proxier sync. No kernel involved.
 *
 * @module
 */
import { parseAllDocuments } from "yaml";
import { FakeNftables } from "../../ffi/nftables/fake.ts";
import type { TableState } from "../../ffi/nftables/types.ts";
import { ClusterState } from "../../proxier/cluster_state.ts";
import type { EndpointSlice, ServiceCIDR, V1Node, V1Service } from "../../proxier/k8s_types.ts";
import type { NodeInfo, ProxierConfig } from "../../proxier/model.ts";
import { type IpFamily, nftFamily } from "../../net/family.ts";
import { TABLE } from "../../proxier/nftables/names.ts";
import { Proxier } from "../../proxier/nftables/proxier.ts";
import { ApiFetch } from "../api_fetch.ts";
import { startProxyInformers } from "../informers.ts";
import { loadKubeConfig } from "../kubeconfig.ts";

/** A Kubernetes object as JSON. */
type Obj = { kind?: string; metadata?: { name?: string }; items?: Obj[] };

/** The API objects in a file: YAML documents (`---`), a JSON object, or a List of them. */
export function readObjects(path: string): Obj[] {
  const out: Obj[] = [];
  const push = (o: unknown) => {
    if (o === null || typeof o !== "object") return;
    const obj = o as Obj;
    if (Array.isArray(obj.items)) obj.items.forEach(push);
    else out.push(obj);
  };
  for (const doc of parseAllDocuments(Deno.readTextFileSync(path))) {
    if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0].message}`);
    push(doc.toJS());
  }
  return out;
}

/** Feeds objects into a ClusterState for `nodeName`. */
export function clusterFromObjects(objs: Obj[], nodeName: string): ClusterState {
  const cs = new ClusterState({ nodeName, log: () => {} });
  for (const o of objs) {
    switch (o.kind) {
      case "Service":
        cs.updateService(null, o as V1Service);
        break;
      case "EndpointSlice":
        cs.updateEndpointSlice(null, o as EndpointSlice);
        break;
      case "Node":
        if (o.metadata?.name === nodeName) cs.updateNode(o as V1Node);
        break;
      case "ServiceCIDR":
        cs.updateServiceCIDR(null, o as ServiceCIDR);
        break;
    }
  }
  return cs;
}

/** Lists Services, EndpointSlices, this Node and ServiceCIDRs once, through the agent's informers. */
export async function clusterFromAPI(
  opts: { kubeconfig?: string; master?: string; nodeName: string },
): Promise<ClusterState> {
  const kube = loadKubeConfig({ kubeconfig: opts.kubeconfig, master: opts.master });
  for (const w of kube.warnings) console.error(`kube-nft-proxy: warning: ${w}`);
  const cs = new ClusterState({ nodeName: opts.nodeName, log: () => {} });
  const pending = new Set(["services", "endpointSlices", "node", "serviceCIDRs"]);
  let done: () => void = () => {};
  const synced = new Promise<void>((res) => (done = res));
  const handlers = <T>(what: string, apply: (prev: T | null, cur: T | null) => void) => ({
    onAdd: (o: T) => apply(null, o),
    onUpdate: (old: T, cur: T) => apply(old, cur),
    onDelete: (o: T) => apply(o, null),
    onSynced: () => {
      pending.delete(what);
      if (pending.size === 0) done();
    },
  });
  const informers = startProxyInformers({
    api: new ApiFetch(kube.creds),
    nodeName: opts.nodeName,
    handlers: {
      services: handlers<V1Service>("services", (a, b) => cs.updateService(a, b)),
      endpointSlices: handlers<EndpointSlice>(
        "endpointSlices",
        (a, b) => cs.updateEndpointSlice(a, b),
      ),
      node: handlers<V1Node>("node", (_a, b) => cs.updateNode(b)),
      serviceCIDRs: handlers<ServiceCIDR>("serviceCIDRs", (a, b) => cs.updateServiceCIDR(a, b)),
    },
  });
  const timeout = setTimeout(() => done(), 30_000);
  await synced;
  clearTimeout(timeout);
  await informers.stop();
  if (pending.size > 0) {
    throw new Error(`the API server did not answer the lists of: ${[...pending].join(", ")}`);
  }
  return cs;
}

/** One family's programmed table and the node as the proxier saw it. */
export interface DryRunTable {
  family: IpFamily;
  table: TableState;
  node: NodeInfo;
}

/** Programs every family of the cluster into in-memory tables, as the agent would. */
export async function programDryRun(
  cs: ClusterState,
  config: ProxierConfig,
): Promise<DryRunTable[]> {
  const input = cs.apply();
  const out: DryRunTable[] = [];
  for (const family of [4, 6] as IpFamily[]) {
    const fam = input.families[family];
    const fake = new FakeNftables(nftFamily(family), TABLE);
    const p = new Proxier({ client: fake, config, trimMemory: false, log: () => {} });
    await p.sync({
      state: fam.state,
      changed: fam.changed,
      deleted: fam.deleted,
      stale: fam.stale,
    });
    out.push({ family, table: fake.state()!, node: fam.state.node });
  }
  return out;
}
