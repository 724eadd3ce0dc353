/**
 * Test support: programs a cluster state into a {@link FakeNftables}
 * through the production path (a real {@link Proxier} sync), so tracer,
 * golden and dataplane tests check exactly what production sends.
 *
 * @module
 */
import { nftFamily } from "../net/family.ts";
import { FakeNftables } from "../ffi/nftables/fake.ts";
import { renderScript } from "../ffi/nftables/script.ts";
import type {
  Chain,
  Element,
  Family,
  Map as NftMap,
  NftablesClient,
  Rule,
  Set as NftSet,
  TableState,
  Transaction,
} from "../ffi/nftables/types.ts";
import type { ProxierConfig, ProxyState, StaleReport } from "../proxier/model.ts";
import { Proxier, type ProxierOptions, type SyncResult } from "../proxier/nftables/proxier.ts";
import { TABLE } from "../proxier/nftables/names.ts";

/** A stale report with nothing in it. */
export function noStaleReport(): StaleReport {
  return { servicesWithNewEndpoints: [], deletedEndpoints: [] };
}

/** A ready proxier over a fresh fake table of the state's family. */
export function fakeProxier(
  state: ProxyState,
  config: ProxierConfig,
  opts: Partial<ProxierOptions> = {},
): { fake: FakeNftables; proxier: Proxier } {
  const fake = new FakeNftables(nftFamily(state.family), TABLE);
  const proxier = new Proxier({ client: fake, config, trimMemory: false, ...opts });
  return { fake, proxier };
}

/** Runs one sync of `state` (all of it changed) and returns its result. */
export async function syncAll(proxier: Proxier, state: ProxyState): Promise<SyncResult> {
  return await proxier.sync({
    state,
    changed: new Set(state.services.keys()),
    deleted: new Set(),
    stale: noStaleReport(),
  });
}

/** Programs `state` into a fresh fake through a full sync. */
export async function programFake(
  state: ProxyState,
  config: ProxierConfig,
  opts: Partial<ProxierOptions> = {},
): Promise<{ fake: FakeNftables; proxier: Proxier }> {
  const out = fakeProxier(state, config, opts);
  await syncAll(out.proxier, state);
  return out;
}

/** A client that records every transaction it applies to the fake behind it. */
export class RecordingClient implements NftablesClient {
  readonly txs: Transaction[] = [];
  constructor(readonly fake: FakeNftables) {}
  get family(): Family {
    return this.fake.family;
  }
  get table(): string {
    return this.fake.table;
  }
  run(tx: Transaction): Promise<void> {
    this.txs.push(tx);
    return this.fake.run(tx);
  }
  check(tx: Transaction): Promise<void> {
    return this.fake.check(tx);
  }
  list(): Promise<TableState | null> {
    return this.fake.list();
  }
  listChains(): Promise<string[]> {
    return this.fake.listChains();
  }
  listElements(kind: "set" | "map", name: string): Promise<Element[]> {
    return this.fake.listElements(kind, name);
  }
  listSets(): Promise<(NftSet | NftMap)[]> {
    return this.fake.listSets();
  }
  listChain(name: string): Promise<{ chain: Chain; rules: Rule[] } | null> {
    return this.fake.listChain(name);
  }
  getElement(kind: "set" | "map", name: string, key: string[]): Promise<Element | null> {
    return this.fake.getElement(kind, name, key);
  }
  close(): void {
    this.fake.close();
  }
  /** The recorded transactions as one nft script, one `# transaction` header each. */
  script(): string {
    return this.txs.map((tx, i) =>
      `# transaction ${i + 1}: ${tx.size} operations\n` +
      renderScript(this.fake.family, this.fake.table, tx.ops)
    ).join("");
  }
}

/** The nft script a cold start of `state` sends (what `--dry-run` prints), through a real sync. */
export async function coldStartScript(state: ProxyState, config: ProxierConfig): Promise<string> {
  const fake = new FakeNftables(nftFamily(state.family), TABLE);
  const rec = new RecordingClient(fake);
  const proxier = new Proxier({ client: rec, config, trimMemory: false });
  await syncAll(proxier, state);
  return rec.script();
}
