/**
 * Random but valid clusters as Kubernetes API objects, and random change sequences over them,
 * for the fuzzed-cluster-state property test. Every object is one the API server would accept
 * (names, ports, families, policies and their dependencies as validation requires), written the
 * way the API server returns it, noise fields included, so the agent's slimming is exercised.
 *
 * Addresses: node 198.18.0.10 / 2001:db8::10; pods in 198.18.64.0/18 and 2001:db8:1::/48 (this
 * node 198.18.65.0/24 and 2001:db8:1:1::/64); ClusterIPs in 198.19.0.0/16 and
 * 2001:db8:ffff::/108; external IPs 198.18.200.x, LB IPs 198.18.201.x (and 2001:db8:200/201::x);
 * outside clients 198.18.150.7 and 198.18.151.7 (2001:db8:150::7, 2001:db8:151::7).
 *
 * @module
 */
import type { ModelWorld, Obj } from "./reference_model.ts";
import { NET, rng } from "./net.ts";
import type { WorldEvent } from "./pipeline.ts";
import { type Gen, mutateService, newService } from "./service_gen.ts";
import { newSlices, reshapeSlices, rollEndpoints, syncSlicePorts } from "./slice_gen.ts";

export { NET, rng };
export type { WorldEvent };

/** The cluster as the API server holds it. */
export class World {
  readonly services = new Map<string, Obj>();
  readonly slices = new Map<string, Obj>();
  node: Obj;
  readonly serviceCIDRs = new Map<string, Obj>();
  #rv = 100;

  constructor(readonly nodeName: string, zone: string | undefined) {
    this.node = {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: nodeName,
        uid: "5f0c1d2e-0000-4000-8000-000000000001",
        labels: {
          "kubernetes.io/hostname": nodeName,
          "kubernetes.io/os": "linux",
          ...(zone === undefined ? {} : { "topology.kubernetes.io/zone": zone }),
        },
        annotations: { "node.alpha.kubernetes.io/ttl": "0" },
      },
      spec: { podCIDR: NET.podCIDR[4], podCIDRs: [NET.podCIDR[4], NET.podCIDR[6]] },
      status: {
        addresses: [
          { type: "InternalIP", address: NET.nodeIP[4] },
          { type: "InternalIP", address: NET.nodeIP[6] },
          { type: "Hostname", address: nodeName },
        ],
        conditions: [{ type: "Ready", status: "True" }],
      },
    };
  }

  /** A fresh resourceVersion. */
  nextRV(): string {
    return String(++this.#rv);
  }

  /** The ServiceCIDR ranges. */
  cidrs(): string[] {
    return [...this.serviceCIDRs.values()].flatMap((c) => c.spec.cidrs as string[]);
  }

  /** What the reference model reads. */
  model(): ModelWorld {
    return {
      services: [...this.services.values()],
      slices: [...this.slices.values()],
      node: this.node,
      serviceCIDRs: this.cidrs(),
    };
  }

  /** Every object as ADDED events (a cold start's lists). */
  snapshot(): WorldEvent[] {
    const out: WorldEvent[] = [{ kind: "Node", type: "ADDED", obj: this.node }];
    for (const o of this.serviceCIDRs.values()) {
      out.push({ kind: "ServiceCIDR", type: "ADDED", obj: o });
    }
    for (const o of this.services.values()) out.push({ kind: "Service", type: "ADDED", obj: o });
    for (const o of this.slices.values()) {
      out.push({ kind: "EndpointSlice", type: "ADDED", obj: o });
    }
    return out;
  }
}

const keyOf = (o: Obj) => `${o.metadata.namespace}/${o.metadata.name}`;

/** Settings of a {@link ClusterFuzzer}. */
export interface FuzzerOptions {
  seed: number;
  /** Services in the initial cluster (default 12). */
  services?: number;
}

/**
 * Builds a random cluster and random change steps. Every change goes through {@link put} /
 * {@link remove}, which keep the world and the event list in step.
 */
export class ClusterFuzzer implements Gen {
  readonly r: () => number;
  readonly world: World;
  #events: WorldEvent[] = [];
  #n = 0;
  #clusterIP = 1;
  #nodePorts = new Set<number>();
  #ext = 1;
  #lb = 1;
  #podIP = 0;
  /** Service keys whose slices should follow a port change in a later step. */
  #lagging = new Set<string>();

  constructor(readonly opts: FuzzerOptions) {
    this.r = rng(opts.seed);
    // A 63-character node name on some seeds: it ends up in hints and slices.
    const name = this.chance(0.3) ? `node-${"n".repeat(52)}-${opts.seed % 10}end` : "fuzz-node";
    this.world = new World(name, this.chance(0.85) ? "zone-a" : undefined);
  }

  // -- Gen: randomness and allocation, shared with the service and slice generators.

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)];
  }
  chance(p: number): boolean {
    return this.r() < p;
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.r() * (hi - lo + 1));
  }
  serial(): number {
    return ++this.#n;
  }
  clusterIP(fam: 4 | 6): string {
    const i = this.#clusterIP++;
    return fam === 4 ? `198.19.${(i >> 8) & 255}.${i & 255}` : `2001:db8:ffff::${i.toString(16)}`;
  }
  externalIP(fam: 4 | 6): string {
    const i = this.#ext++;
    return fam === 4 ? `198.18.200.${i % 250 + 1}` : `2001:db8:200::${i.toString(16)}`;
  }
  lbIP(fam: 4 | 6): string {
    const i = this.#lb++;
    return fam === 4 ? `198.18.201.${i % 250 + 1}` : `2001:db8:201::${i.toString(16)}`;
  }
  nodePort(): number {
    // The range's edges first, then random free ports.
    for (const p of [30000, 32767]) {
      if (!this.#nodePorts.has(p) && this.chance(0.5)) return this.#take(p);
    }
    for (;;) {
      const p = this.int(30000, 32767);
      if (!this.#nodePorts.has(p)) return this.#take(p);
    }
  }
  #take(p: number): number {
    this.#nodePorts.add(p);
    return p;
  }
  freeNodePort(p: number | undefined): void {
    if (p !== undefined) this.#nodePorts.delete(p);
  }
  podIP(fam: 4 | 6, where: "local" | "remote" | "nameless"): string {
    const i = this.#podIP++ % 240 + 2;
    if (fam === 4) {
      const net = where === "local" ? 65 : where === "nameless" ? 70 : this.pick([66, 67]);
      return `198.18.${net}.${i}`;
    }
    const net = where === "local" ? 1 : where === "nameless" ? 0x70 : this.pick([2, 3]);
    return `2001:db8:1:${net.toString(16)}::${i.toString(16)}`;
  }
  rv(): string {
    return this.world.nextRV();
  }

  /** Stores `obj` (a fresh version) and records the event. */
  put(kind: "Service" | "EndpointSlice", obj: Obj): void {
    const map = kind === "Service" ? this.world.services : this.world.slices;
    const k = keyOf(obj);
    obj.metadata.resourceVersion = this.rv();
    this.#events.push({ kind, type: map.has(k) ? "MODIFIED" : "ADDED", obj: structuredClone(obj) });
    map.set(k, obj);
  }

  /** Deletes an object and records the event. */
  remove(kind: "Service" | "EndpointSlice", key: string): void {
    const map = kind === "Service" ? this.world.services : this.world.slices;
    const obj = map.get(key);
    if (obj === undefined) return;
    map.delete(key);
    this.#events.push({ kind, type: "DELETED", obj: structuredClone(obj) });
  }

  /** Slices of a Service. */
  slicesOf(svc: Obj): Obj[] {
    return [...this.world.slices.values()].filter((s) =>
      s.metadata.namespace === svc.metadata.namespace &&
      s.metadata.labels["kubernetes.io/service-name"] === svc.metadata.name
    );
  }

  // -- The cluster and its changes.

  /** The initial cluster, as the events a cold start would see. */
  initial(): WorldEvent[] {
    this.#events = [];
    const cidr: Obj = {
      apiVersion: "networking.k8s.io/v1",
      kind: "ServiceCIDR",
      metadata: { name: "kubernetes", resourceVersion: this.rv() },
      spec: { cidrs: [...NET.serviceCIDRs] },
    };
    this.world.serviceCIDRs.set("kubernetes", cidr);
    this.#events.push({ kind: "Node", type: "ADDED", obj: structuredClone(this.world.node) });
    this.#events.push({ kind: "ServiceCIDR", type: "ADDED", obj: structuredClone(cidr) });
    for (let i = 0; i < (this.opts.services ?? 12); i++) this.#addService();
    return this.#events;
  }

  #addService(): void {
    const svc = newService(this);
    this.put("Service", svc);
    for (const s of newSlices(this, svc)) this.put("EndpointSlice", s);
  }

  /** One step: one to four random changes, as events. */
  step(): WorldEvent[] {
    this.#events = [];
    for (let k = this.int(1, 4); k > 0; k--) this.#change();
    return this.#events;
  }

  #change(): void {
    const services = [...this.world.services.values()];
    const svc = services.length > 0 ? this.pick(services) : undefined;
    const x = this.r();
    if (svc === undefined || x < 0.12) return this.#addService();
    if (x < 0.2) return this.#deleteService(svc);
    if (x < 0.45) {
      if (mutateService(this, svc)) {
        this.put("Service", svc);
        // The EndpointSlice controller follows a port change now or a step later.
        if (this.chance(0.5)) syncSlicePorts(this, svc);
        else this.#lagging.add(keyOf(svc));
      }
      return;
    }
    if (x < 0.8) return rollEndpoints(this, svc);
    if (x < 0.85) {
      for (const k of this.#lagging) {
        const s = this.world.services.get(k);
        if (s !== undefined) syncSlicePorts(this, s);
      }
      this.#lagging.clear();
      return;
    }
    if (x < 0.9) return this.#reshape(svc);
    if (x < 0.95) return this.#changeNode();
    this.#redeliver();
  }

  #deleteService(svc: Obj): void {
    this.remove("Service", keyOf(svc));
    for (const p of svc.spec.ports ?? []) this.freeNodePort(p.nodePort);
    this.freeNodePort(svc.spec.healthCheckNodePort);
    // The garbage collector deletes the slices, usually soon, sometimes after a sync.
    const slices = this.slicesOf(svc);
    for (const s of slices) if (this.chance(0.85)) this.remove("EndpointSlice", keyOf(s));
  }

  /** Slice-level reshaping, or a port change the controller follows at once. */
  #reshape(svc: Obj): void {
    if (this.chance(0.7)) return reshapeSlices(this, svc);
    if (mutateService(this, svc)) {
      this.put("Service", svc);
      syncSlicePorts(this, svc);
    }
  }

  /** The node's zone label changes (or goes away): topology is re-evaluated everywhere. */
  #changeNode(): void {
    const labels = this.world.node.metadata.labels;
    const zone = this.pick([...NET.zones, undefined]);
    if (zone === undefined) delete labels["topology.kubernetes.io/zone"];
    else labels["topology.kubernetes.io/zone"] = zone;
    this.world.node.metadata.resourceVersion = this.rv();
    this.#events.push({ kind: "Node", type: "MODIFIED", obj: structuredClone(this.world.node) });
  }

  /** A re-list hands back an object unchanged (same resourceVersion): nothing may change. */
  #redeliver(): void {
    const all = [...this.world.services.values(), ...this.world.slices.values()];
    if (all.length === 0) return;
    const o = this.pick(all);
    const kind = o.kind === "Service" ? "Service" : "EndpointSlice";
    this.#events.push({ kind, type: "MODIFIED", obj: structuredClone(o) });
  }
}
