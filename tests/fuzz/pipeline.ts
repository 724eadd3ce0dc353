/**
 * The agent's own pipeline from API objects to rules, driven step by step: what the informers
 * do with an event (label and field selectors, slimming at the edge, the kept identity handed
 * back as the old object, re-deliveries of one resourceVersion skipped), then what
 * agent/engine.ts does in a sync (`ClusterState.apply()`, then each family's
 * `Proxier.sync()` with the changed and deleted ids, the stale report and the node flag). Only
 * the timers around them are left out, so a test decides when a sync runs and what time it is.
 *
 * @module
 */
import {
  identityOf,
  slimEndpointSlice,
  slimNode,
  slimService,
  slimServiceCIDR,
} from "../../agent/slim.ts";
import { FakeNftables } from "../../ffi/nftables/fake.ts";
import type { NftablesClient } from "../../ffi/nftables/types.ts";
import { ClusterState } from "../../proxier/cluster_state.ts";
import type { EndpointSlice, ServiceCIDR, V1Node, V1Service } from "../../proxier/k8s_types.ts";
import type { ProxierConfig } from "../../proxier/model.ts";
import type { IpFamily } from "../../net/family.ts";
import { TABLE } from "../../proxier/nftables/names.ts";
import { Proxier, type SyncResult } from "../../proxier/nftables/proxier.ts";

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
  /** One client per family; FakeNftables by default. */
  clients?: Record<IpFamily, NftablesClient>;
  /** The proxiers' clock (ms): stale chains are deleted a second after they were retired. */
  now: () => number;
}

/** One sync's results per family. */
export type SyncResults = Record<IpFamily, SyncResult | null>;

/** The informers, the cluster state and both families' proxiers of one agent. */
export class AgentPipeline {
  readonly state: ClusterState;
  readonly clients: Record<IpFamily, NftablesClient>;
  readonly proxiers: Record<IpFamily, Proxier>;
  /** Every warning or error the trackers and proxiers logged (valid input should log none). */
  readonly complaints: string[] = [];
  /** What each informer delivered last, by kind and key: the object handed back as "old". */
  #delivered = new Map<string, Obj>();

  constructor(readonly opts: PipelineOptions) {
    const complain = (level: string, msg: string) => {
      if (level !== "info") this.complaints.push(`${level}: ${msg}`);
    };
    this.state = new ClusterState({ nodeName: opts.nodeName, log: complain });
    this.clients = opts.clients ?? {
      4: new FakeNftables("ip", TABLE),
      6: new FakeNftables("ip6", TABLE),
    };
    const mk = (f: IpFamily) => {
      const p = new Proxier({
        client: this.clients[f],
        config: opts.config,
        trimMemory: false,
        now: opts.now,
        shouldYield: () => this.state.hasPendingChanges(),
        log: complain,
      });
      return p;
    };
    this.proxiers = { 4: mk(4), 6: mk(6) };
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
    const s = this.state;
    if (kind === "Service") s.updateService(prev as V1Service | null, cur as V1Service | null);
    else if (kind === "EndpointSlice") {
      s.updateEndpointSlice(prev as EndpointSlice | null, cur as EndpointSlice | null);
    } else if (kind === "Node") s.updateNode(cur as V1Node | null);
    // A deletion hands over the deleted object as `prev`.
    else if (cur === null) s.updateServiceCIDR(prev as ServiceCIDR, null);
    else s.updateServiceCIDR(prev as ServiceCIDR | null, cur as ServiceCIDR);
  }

  /** One sync, as SyncEngine's: apply what was recorded, then sync each family. */
  async sync(): Promise<SyncResults> {
    const input = this.state.apply();
    const nodeChanged = input.nodeChanged || input.serviceCIDRsChanged;
    const out = { 4: null, 6: null } as SyncResults;
    for (const f of [4, 6] as const) {
      const fam = input.families[f];
      out[f] = await this.proxiers[f].sync({
        state: fam.state,
        changed: fam.changed,
        deleted: fam.deleted,
        stale: fam.stale,
        nodeChanged,
      });
    }
    return out;
  }

  /** A cold-started agent's view of the same world: every object listed once, then one sync. */
  static async coldStart(
    opts: Omit<PipelineOptions, "clients">,
    events: readonly WorldEvent[],
  ): Promise<AgentPipeline> {
    const p = new AgentPipeline(opts);
    for (const ev of events) p.deliver(ev);
    await p.sync();
    return p;
  }
}
