/**
 * The cluster as `trace --dry-run` / `explain --dry-run` see it: read once
 * from a file of API objects (YAML documents or a JSON List), or listed once
 * from the API server through the agent's own informers, into the agent's
 * own node (agent/node.ts) over in-memory tables, then one sync. No kernel
 * involved.
 *
 * @module
 */
import { parseAllDocuments } from "yaml";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { TableState } from "../../ffi/nftables/types.ts";
import type { NodeInfo } from "../../proxier/model.ts";
import { type IpFamily, nftFamily } from "../../net/family.ts";
import { TABLE } from "../../proxier/nftables/names.ts";
import type { SyncEngine } from "../engine.ts";
import type { AgentConfig } from "../flags.ts";
import { Logger } from "../log.ts";
import { buildNode, informerHandlers } from "../node.ts";
import { ApiFetch } from "../kube/api_fetch.ts";
import { startProxyInformers } from "../kube/informers.ts";
import { loadKubeConfig } from "../kube/kubeconfig.ts";

/** A Kubernetes object as JSON. */
/** A Kubernetes object or list as read from a file: only what the reader looks at. */
export type Obj = { kind?: string; metadata?: { name?: string }; items?: Obj[] };

/** The API objects in a file: YAML documents (`---`), a JSON object, or a List of them. */
function readObjects(path: string): Obj[] {
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

/** Records objects into a node's engine, as its informers would deliver them. */
function recordObjects(engine: SyncEngine, objs: Obj[], nodeName: string): void {
  const h = informerHandlers(engine);
  for (const o of objs) {
    switch (o.kind) {
      case "Service":
        h.services.onAdd(o);
        break;
      case "EndpointSlice":
        h.endpointSlices.onAdd(o);
        break;
      case "Node":
        if (o.metadata?.name === nodeName) h.node.onAdd(o);
        break;
      case "ServiceCIDR":
        h.serviceCIDRs.onAdd(o);
        break;
    }
  }
}

/** Lists Services, EndpointSlices, this Node and ServiceCIDRs once, through the agent's informers. */
async function recordFromAPI(
  engine: SyncEngine,
  opts: { kubeconfig?: string; master?: string; nodeName: string },
): Promise<void> {
  const kube = loadKubeConfig({ kubeconfig: opts.kubeconfig, master: opts.master });
  for (const w of kube.warnings) console.error(`kube-nft-proxy: warning: ${w}`);
  const pending = new Set<string>(["services", "endpointSlices", "node", "serviceCIDRs"]);
  let done: () => void = () => {};
  const synced = new Promise<void>((res) => (done = res));
  const bound = informerHandlers(engine);
  const handlers = Object.fromEntries(
    Object.entries(bound).map(([what, h]) => [what, {
      ...h,
      onSynced: () => {
        pending.delete(what);
        if (pending.size === 0) done();
      },
    }]),
  );
  const informers = startProxyInformers({
    api: new ApiFetch(kube.creds),
    nodeName: opts.nodeName,
    handlers,
  });
  const timeout = setTimeout(() => done(), 30_000);
  await synced;
  clearTimeout(timeout);
  await informers.stop();
  if (pending.size > 0) {
    throw new Error(`the API server did not answer the lists of: ${[...pending].join(", ")}`);
  }
}

/** One family's programmed table and the node as the proxier saw it. */
export interface DryRunTable {
  /** The table's IP family. */
  family: IpFamily;
  /** The programmed table, as the in-memory nftables holds it. */
  table: TableState;
  /** The node as the proxier saw it. */
  node: NodeInfo;
}

/** Where a dry run's cluster comes from: a file of objects, else the API server. */
export interface DryRunSource {
  /** A file of Kubernetes objects (YAML or JSON) to build the cluster from. */
  objects?: string;
  /** A kubeconfig to read the cluster from the API server. */
  kubeconfig?: string;
  /** The API server's address, overriding the kubeconfig's. */
  master?: string;
}

/**
 * Programs every family of the cluster into in-memory tables, as the agent
 * would: the agent's node (buildNode) over in-memory nftables, fed the
 * cluster, then one sync.
 */
export async function programDryRun(
  cfg: AgentConfig,
  nodeName: string,
  source: DryRunSource,
): Promise<DryRunTable[]> {
  const fakes = new Map<IpFamily, MemoryNftables>();
  const families: IpFamily[] = [4, 6];
  const quiet = new Logger({ verbosity: 0, sink: { out: () => {}, err: () => {} } });
  const node = await buildNode({ ...cfg, dryRun: true }, {
    nftables: (f) => {
      const fake = new MemoryNftables(nftFamily(f), TABLE);
      fakes.set(f, fake);
      return fake;
    },
  }, { nodeName, families, log: quiet, adopted: false, proxier: { trimMemory: false } });
  try {
    if (source.objects !== undefined) {
      recordObjects(node.engine, readObjects(source.objects), nodeName);
    } else {
      await recordFromAPI(node.engine, { ...source, nodeName });
    }
    node.engine.markSynced("services");
    node.engine.markSynced("endpointSlices");
    await node.engine.syncNow();
    return families.map((family) => ({
      family,
      table: fakes.get(family)!.state()!,
      node: node.proxiers[family]!.programmed!.node,
    }));
  } finally {
    await node.close();
  }
}
