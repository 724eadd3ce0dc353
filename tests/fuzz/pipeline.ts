/**
 * The agent's own pipeline from API objects to rules, driven step by step: what the informers
 * do with an event (label and field selectors, slimming at the edge, the kept identity handed
 * back as the old object, re-deliveries of one resourceVersion skipped), into the agent's own
 * node (agent/node.ts buildNode) through the informer handlers production binds, and one
 * engine sync (SyncEngine.syncNow) at a time. Only the runner's timers are left out, so a test
 * decides when a sync runs and what time it is.
 *
 * @module
 */
import {
  identityOf,
  slimEndpointSlice,
  slimNode,
  slimService,
  slimServiceCIDR,
} from "../../agent/kube/slim.ts";
import { parseArgs } from "../../agent/flags.ts";
import { Logger } from "../../agent/log.ts";
import { buildNode, informerHandlers, type ProxyNode } from "../../agent/node.ts";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { NftablesClient } from "../../ffi/nftables/types.ts";
import type { ClusterState } from "../../proxier/cluster_state.ts";
import type { ProxierConfig } from "../../proxier/model.ts";
import type { IpFamily } from "../../net/family.ts";
import { TABLE } from "../../proxier/nftables/names.ts";
import type { Proxier, SyncResult } from "../../proxier/nftables/proxier.ts";

/** A Kubernetes object as JSON. */
// deno-lint-ignore no-explicit-any
type Obj = Record<string, any>;

/** One informer event. */
export interface WorldEvent {
  kind: "Service" | "EndpointSlice" | "Node" | "ServiceCIDR";
  type: "ADDED" | "MODIFIED" | "DELETED";
  obj: Obj;
}

const PROXY_NAME = "service.kubernetes.io/service-proxy-name";
const HEADLESS = "service.kubernetes.io/headless";

/** Settings of an {@link AgentPipeline}. */
export interface PipelineOptions {
  nodeName: string;
  config: ProxierConfig;
  /** One client per family; MemoryNftables by default. */
  clients?: Record<IpFamily, NftablesClient>;
  /** The proxiers' clock (ms): stale chains are deleted a second after they were retired. */
  now: () => number;
}

/** One sync's results per family. */
export type SyncResults = Record<IpFamily, SyncResult | null>;

/** The informers and the agent's node (agent/node.ts) over both families. */
export class AgentPipeline {
  readonly node: ProxyNode;
  readonly clients: Record<IpFamily, NftablesClient>;
  /** Every warning or error the trackers, proxiers and engine logged (valid input should log none). */
  readonly complaints: string[];
  /** What each informer delivered last, by kind and key: the object handed back as "old". */
  #delivered = new Map<string, Obj>();
  readonly #h: ReturnType<typeof informerHandlers>;
  readonly opts: PipelineOptions;

  private constructor(opts: PipelineOptions, node: ProxyNode, complaints: string[]) {
    this.opts = opts;
    this.node = node;
    this.complaints = complaints;
    this.clients = node.clients as Record<IpFamily, NftablesClient>;
    this.#h = informerHandlers(node.engine);
    // The informers' initial lists are what the test delivers before its first sync.
    node.engine.markSynced("services");
    node.engine.markSynced("endpointSlices");
  }

  /** Builds the agent's node over `opts.clients` (MemoryNftables by default). */
  static async create(opts: PipelineOptions): Promise<AgentPipeline> {
    const complaints: string[] = [];
    const log = new Logger({
      verbosity: 0,
      sink: { out: () => {}, err: (line) => complaints.push(line) },
    });
    const clients = opts.clients ?? {
      4: new MemoryNftables("ip", TABLE),
      6: new MemoryNftables("ip6", TABLE),
    };
    const node = await buildNode(parseArgs([]), { nftables: (f) => clients[f] }, {
      nodeName: opts.nodeName,
      families: [4, 6],
      log,
      adopted: false,
      rules: opts.config,
      proxier: { now: opts.now, trimMemory: false },
    });
    return new AgentPipeline(opts, node, complaints);
  }

  /** The cluster state the informers feed. */
  get state(): ClusterState {
    return this.node.state;
  }

  /** Both families' proxiers. */
  get proxiers(): Record<IpFamily, Proxier> {
    return this.node.proxiers as Record<IpFamily, Proxier>;
  }

  /** Whether the informer's selector lets the object through. */
  #selected(ev: WorldEvent): boolean {
    const labels = ev.obj.metadata?.labels ?? {};
    switch (ev.kind) {
      case "Service":
        return labels[PROXY_NAME] === undefined;
      case "EndpointSlice":
        return labels[PROXY_NAME] === undefined && labels[HEADLESS] === undefined;
      case "Node":
        return ev.obj.metadata?.name === this.opts.nodeName;
      case "ServiceCIDR":
        return true;
    }
  }

  /** Hands one watch event to the agent, as its informers would. */
  deliver(ev: WorldEvent): void {
    const key = `${ev.kind}/${ev.obj.metadata.namespace ?? ""}/${ev.obj.metadata.name}`;
    const slim = ev.kind === "Service"
      ? slimService
      : ev.kind === "EndpointSlice"
      ? slimEndpointSlice
      : ev.kind === "Node"
      ? slimNode
      : slimServiceCIDR;
    // The watch hands the informer its own copy of the JSON.
    const obj: Obj = slim(structuredClone(ev.obj));
    const old = this.#delivered.get(key);
    // An object leaving the selector arrives as a deletion (the API server's filtered watch).
    if (ev.type === "DELETED" || !this.#selected(ev)) {
      if (old === undefined) return;
      this.#delivered.delete(key);
      this.#handle(ev.kind, obj, null);
      return;
    }
    const keep = ev.kind === "Service" || ev.kind === "EndpointSlice" ? identityOf(obj) : obj;
    if (old !== undefined && old.metadata?.resourceVersion === obj.metadata?.resourceVersion) {
      return;
    }
    this.#delivered.set(key, keep);
    this.#handle(ev.kind, old ?? null, obj);
  }

  #handle(kind: WorldEvent["kind"], prev: Obj | null, cur: Obj | null): void {
    const h = kind === "Service"
      ? this.#h.services
      : kind === "EndpointSlice"
      ? this.#h.endpointSlices
      : kind === "Node"
      ? this.#h.node
      : this.#h.serviceCIDRs;
    if (prev === null) h.onAdd(cur);
    // A deletion hands over the deleted object as `prev`.
    else if (cur === null) h.onDelete(prev);
    else h.onUpdate(prev, cur);
  }

  /** One sync of the engine (SyncEngine.syncNow): a family that stepped aside reports null. */
  async sync(): Promise<SyncResults> {
    const round = await this.node.engine.syncNow();
    return { 4: round?.results[4] ?? null, 6: round?.results[6] ?? null };
  }

  /** A cold-started agent's view of the same world: every object listed once, then one sync. */
  static async coldStart(
    opts: Omit<PipelineOptions, "clients">,
    events: readonly WorldEvent[],
  ): Promise<AgentPipeline> {
    const p = await AgentPipeline.create(opts);
    for (const ev of events) p.deliver(ev);
    await p.sync();
    return p;
  }
}
