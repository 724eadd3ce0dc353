/**
 * What the engine reports per Service after a sync, kept from the changed Service ports only:
 * the `kubeproxy_sync_proxy_rules_no_local_endpoints_total` counts and the HealthCheckNodePort
 * servers' entries. Scanning every Service on every sync made a one-endpoint change cost O(N)
 * at 30k Services; here a partial sync costs what it changed, and a full sync rebuilds all.
 *
 * @module
 */
import type { ProxyState } from "../proxier/model.ts";
import type { ServiceHealthEntry } from "./http/health.ts";

const INTERNAL = 1, EXTERNAL = 2;

/** One HealthCheckNodePort entry, with the port it is served on. */
export interface HealthTally extends ServiceHealthEntry {
  /** The HealthCheckNodePort it is served on. */
  port: number;
}

/** One IP family's per-Service tallies. */
export class ServiceTallies {
  /** Service port id -> INTERNAL | EXTERNAL bits of the no-local-endpoints counts. */
  readonly #noLocal = new Map<string, number>();
  readonly #health = new Map<string, HealthTally>();
  #internal = 0;
  #external = 0;
  #healthChanged = true;

  /** Services with a Local policy, endpoints, and none of them local and usable (internal). */
  get internal(): number {
    return this.#internal;
  }

  /** The same for the external policy. */
  get external(): number {
    return this.#external;
  }

  /**
   * Recomputes the tallies of `ids` (present or deleted Service port ids), or of every Service
   * in `s` when `ids` is undefined.
   */
  update(s: ProxyState, ids?: Iterable<string>): void {
    if (ids === undefined) {
      this.#noLocal.clear();
      this.#health.clear();
      this.#internal = this.#external = 0;
      this.#healthChanged = true;
      ids = s.services.keys();
    }
    for (const id of ids) {
      this.#setNoLocal(id, noLocalBits(s, id));
      this.#setHealth(id, healthOf(s, id));
    }
  }

  /** The health entries, and whether they changed since the last call. */
  takeHealth(): { changed: boolean; entries: Iterable<HealthTally> } {
    const changed = this.#healthChanged;
    this.#healthChanged = false;
    return { changed, entries: this.#health.values() };
  }

  #setNoLocal(id: string, bits: number): void {
    const old = this.#noLocal.get(id) ?? 0;
    if (old === bits) return;
    this.#internal += (bits & INTERNAL) - (old & INTERNAL);
    this.#external += ((bits & EXTERNAL) - (old & EXTERNAL)) / EXTERNAL;
    if (bits === 0) this.#noLocal.delete(id);
    else this.#noLocal.set(id, bits);
  }

  #setHealth(id: string, h: HealthTally | undefined): void {
    const old = this.#health.get(id);
    const same = old?.port === h?.port && old?.service === h?.service &&
      old?.localEndpoints === h?.localEndpoints;
    if (same) return;
    if (h === undefined) this.#health.delete(id);
    else this.#health.set(id, h);
    this.#healthChanged = true;
  }
}

function noLocalBits(s: ProxyState, id: string): number {
  const svc = s.services.get(id);
  if (svc === undefined || (!svc.internalPolicyLocal && !svc.externalPolicyLocal)) return 0;
  const eps = s.endpoints.get(id) ?? [];
  if (eps.length === 0 || eps.some((e) => e.isLocal && (e.ready || e.serving))) return 0;
  return (svc.internalPolicyLocal ? INTERNAL : 0) | (svc.externalPolicyLocal ? EXTERNAL : 0);
}

function healthOf(s: ProxyState, id: string): HealthTally | undefined {
  const svc = s.services.get(id);
  if (svc === undefined || svc.healthCheckNodePort === 0 || !svc.externalPolicyLocal) {
    return undefined;
  }
  let local = 0;
  for (const e of s.endpoints.get(id) ?? []) if (e.isLocal && e.ready) local++;
  return {
    port: svc.healthCheckNodePort,
    service: `${svc.namespace}/${svc.name}`,
    localEndpoints: local,
  };
}
