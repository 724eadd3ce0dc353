/**
 * Test support: programs a cluster state into a {@link MemoryNftables}
 * through the production path (a proxier of the agent's node, built by
 * agent/node.ts, and a real sync), so tracer, golden and dataplane tests
 * check exactly what production sends.
 *
 * @module
 */
import { nftFamily } from "../net/family.ts";
import { MemoryNftables } from "../ffi/nftables/memory/client.ts";
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
import type { Proxier, SyncResult } from "../proxier/nftables/proxier.ts";
import { parseArgs } from "../agent/flags.ts";
import { Logger } from "../agent/log.ts";
import { buildNode } from "../agent/node.ts";
import { TABLE } from "../proxier/nftables/names.ts";

/** A stale report with nothing in it. */
export function noStaleReport(): StaleReport {
  return { servicesWithNewEndpoints: [], deletedEndpoints: [] };
}

/** The agent's node (agent/node.ts) for the state's family over `client`, its proxier ready. */
export async function nodeProxier(
  state: ProxyState,
  config: ProxierConfig,
  client: NftablesClient,
): Promise<Proxier> {
  const node = await buildNode(parseArgs(["--dry-run"]), { nftables: () => client }, {
    nodeName: state.node.name || "node",
    families: [state.family],
    log: new Logger({ verbosity: 0, sink: { out: () => {}, err: () => {} } }),
    adopted: false,
    rules: config,
    proxier: { trimMemory: false },
  });
  // The node's own cluster state stays empty: once applied, no change waits behind a sync.
  node.state.apply();
  return node.proxiers[state.family]!;
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
): Promise<{ fake: MemoryNftables; proxier: Proxier }> {
  const fake = new MemoryNftables(nftFamily(state.family), TABLE);
  const proxier = await nodeProxier(state, config, fake);
  await syncAll(proxier, state);
  return { fake, proxier };
}

/** A client that records every transaction it applies to the fake behind it. */
export class RecordingClient implements NftablesClient {
  readonly txs: Transaction[] = [];
  constructor(readonly fake: MemoryNftables) {}
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
  const fake = new MemoryNftables(nftFamily(state.family), TABLE);
  const rec = new RecordingClient(fake);
  await syncAll(await nodeProxier(state, config, rec), state);
  return rec.script();
}
