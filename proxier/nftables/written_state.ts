/**
 * What the proxier last committed to one table, kept compact: per service
 * port only the keys it claims, per frontend the elements written for it as
 * one string, and reference counts for shared elements and class chains.
 * No rule text is kept except for the few chains that exist per service.
 *
 * The planner never changes a {@link WrittenState}: it works on a
 * {@link Draft} over it and hands back a {@link Delta}; the proxier applies
 * that with {@link WrittenState.commit} once the kernel has accepted every
 * transaction of the plan. That is the only writer.
 *
 * @module
 */

/** What one service port claims in the table. */
export interface ServiceRecord {
  /** Frontend keys it claims (it writes those it wins, see {@link FrontendRecord}). */
  frontends: readonly string[];
  /** Its ClusterIP in `cluster-ips` ("" for none). */
  clusterIP: string;
  /** Endpoint IPs it puts in `hairpin`. */
  hairpin: readonly string[];
  /** Chains of its own. */
  chains: readonly string[];
  /** Affinity sets. */
  sets: readonly string[];
}

/**
 * The elements written for one frontend, and who wrote them. When several
 * service ports claim one frontend (two Services listing the same external
 * IP and port), the lowest port id wins and writes; the others wait in
 * `others` and take over when it leaves.
 */
export interface FrontendRecord {
  /** The winning service port id; "" for elements found in the kernel that no port claims. */
  owner: string;
  /** True for a NodePort frontend (`proto . port`). */
  nodePort: boolean;
  /** Encoded elements (see frontend.ts `renderFrontend`). */
  spec: string;
  /** Other claimers, sorted. */
  others?: readonly string[];
}

/** The maps of a written state that the planner changes, by field. */
export interface Fields {
  /** What each service port wrote, by id. */
  services: Map<string, ServiceRecord>;
  /** Each frontend's owner and elements, by key. */
  frontends: Map<string, FrontendRecord>;
  /** ClusterIP -> number of service ports claiming it. */
  clusterIPs: Map<string, number>;
  /** Endpoint IP -> number of service ports putting it in `hairpin`. */
  hairpin: Map<string, number>;
  /** Every chain believed to exist -> its digest (rules), or {@link UNKNOWN}. */
  chains: Map<string, string>;
  /** Class chain name -> number of frontends dispatching to it. */
  classes: Map<string, number>;
  /** Named sets and maps believed to exist -> their declaration digest, or {@link UNKNOWN}. */
  sets: Map<string, string>;
  /** Chains unreferenced and waiting to be deleted -> when they became so (engine clock, ms). */
  staleChains: Map<string, number>;
  /** Sets and maps waiting to be deleted (after the chains using them) -> since when. */
  staleSets: Map<string, number>;
}

/** Digest of a chain or set that exists but whose content is not known (found in the kernel). */
export const UNKNOWN = "\u0000unknown";

/** Names of the fields. */
export type Field = keyof Fields;

const FIELDS: readonly Field[] = [
  "services",
  "frontends",
  "clusterIPs",
  "hairpin",
  "chains",
  "classes",
  "sets",
  "staleChains",
  "staleSets",
];

/** What a field of the written state holds per key. */
export type ValueOf<F extends Field> = Fields[F] extends Map<string, infer V> ? V : never;

/** Changes to a written state: per field, key -> new value, or null for removal. */
export type Delta =
  & {
    [F in Field]: Map<string, ValueOf<F> | null>;
  }
  & {
    /** Generation of the endpoint maps, when it changes. */
    gen?: number;
    /** Build context key, when it changes. */
    contextKey?: string;
    /** Digest of the skeleton as written, when it changes. */
    skeleton?: string;
  };

/** An empty delta. */
export function newDelta(): Delta {
  return {
    services: new Map(),
    frontends: new Map(),
    clusterIPs: new Map(),
    hairpin: new Map(),
    chains: new Map(),
    classes: new Map(),
    sets: new Map(),
    staleChains: new Map(),
    staleSets: new Map(),
  };
}

/** The committed state of one table. */
export class WrittenState implements Fields {
  /** What each service port wrote, by id. */
  readonly services = new Map<string, ServiceRecord>();
  /** Each frontend's owner and elements, by key. */
  readonly frontends = new Map<string, FrontendRecord>();
  readonly clusterIPs = new Map<string, number>();
  readonly hairpin = new Map<string, number>();
  readonly chains = new Map<string, string>();
  readonly classes = new Map<string, number>();
  readonly sets = new Map<string, string>();
  readonly staleChains = new Map<string, number>();
  readonly staleSets = new Map<string, number>();
  /** Generation of the endpoint maps in use; undefined before the first full sync. */
  gen: number | undefined;
  /** Build context the rules were written with. */
  contextKey: string | undefined;
  /** Digest of the skeleton as written. */
  skeleton: string | undefined;

  /** True when nothing is known to be written (cold start, or after a failed full sync). */
  get empty(): boolean {
    return this.gen === undefined;
  }

  /** Applies a plan's delta after the kernel accepted it. The only way this state changes. */
  commit(d: Delta): void {
    // A plan hands out its delta as its generator's return value: none means it was not drained.
    if (d === undefined) throw new Error("WrittenState.commit: no delta (a plan not drained?)");
    for (const f of FIELDS) {
      const target = this[f] as Map<string, unknown>;
      for (const [k, v] of d[f] as Map<string, unknown>) {
        if (v === null) target.delete(k);
        else target.set(k, v);
      }
    }
    if (d.gen !== undefined) this.gen = d.gen;
    if (d.contextKey !== undefined) this.contextKey = d.contextKey;
    if (d.skeleton !== undefined) this.skeleton = d.skeleton;
  }
}

/**
 * A pending view over a written state: reads see the draft's own changes
 * first, writes go to the draft only. `cut()` hands out the changes so far.
 */
export class Draft {
  #delta: Delta = newDelta();

  /**
   * An empty draft over `base`.
   * @param base the committed state this draft builds on (never modified).
   */
  constructor(readonly base: WrittenState) {}

  /** The value of `key` in `field`, as the draft sees it. */
  get<F extends Field>(field: F, key: string): ValueOf<F> | undefined {
    const pending = this.#delta[field] as Map<string, ValueOf<F> | null>;
    const v = pending.get(key);
    if (v !== undefined) return v === null ? undefined : v;
    if (pending.has(key)) return undefined;
    return (this.base[field] as Map<string, ValueOf<F>>).get(key);
  }

  /** True when `key` exists in `field`. */
  has(field: Field, key: string): boolean {
    return this.get(field, key) !== undefined;
  }

  /** Sets (or with null, removes) `key` in `field`. */
  set<F extends Field>(field: F, key: string, value: ValueOf<F> | null): void {
    (this.#delta[field] as Map<string, ValueOf<F> | null>).set(key, value);
  }

  /** Adds `d` to a counter, removing it at zero; returns the new count. */
  bump(field: "clusterIPs" | "hairpin" | "classes", key: string, d: number): number {
    const v = (this.get(field, key) ?? 0) + d;
    this.set(field, key, v <= 0 ? null : v);
    return Math.max(0, v);
  }

  /** Whether the draft holds a value of `field` unlike the base's (one set back to it is not). */
  differs(field: Field): boolean {
    const base = this.base[field] as Map<string, unknown>;
    for (const [k, v] of this.#delta[field] as Map<string, unknown>) {
      if ((v === null ? undefined : v) !== base.get(k)) return true;
    }
    return false;
  }

  /** Every key of `field` the draft sees (base keys plus its own, minus removals). */
  *keys(field: Field): Iterable<string> {
    const pending = this.#delta[field] as Map<string, unknown>;
    for (const k of (this.base[field] as Map<string, unknown>).keys()) {
      if (!pending.has(k)) yield k;
    }
    for (const [k, v] of pending) if (v !== null) yield k;
  }

  /** Sets the generation, context key or skeleton digest the draft writes. */
  setMeta(m: { gen?: number; contextKey?: string; skeleton?: string }): void {
    if (m.gen !== undefined) this.#delta.gen = m.gen;
    if (m.contextKey !== undefined) this.#delta.contextKey = m.contextKey;
    if (m.skeleton !== undefined) this.#delta.skeleton = m.skeleton;
  }

  /** The generation as the draft sees it. */
  get gen(): number | undefined {
    return this.#delta.gen ?? this.base.gen;
  }

  /** The skeleton digest as the draft sees it. */
  get skeleton(): string | undefined {
    return this.#delta.skeleton ?? this.base.skeleton;
  }

  /** The changes made so far. */
  get delta(): Delta {
    return this.#delta;
  }
}
