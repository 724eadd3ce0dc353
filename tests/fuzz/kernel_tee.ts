/**
 * The fuzzed-cluster-state property against the real kernel: each family's client applies
 * every transaction to the kernel (through libnftables) and to a MemoryNftables, and fails the
 * run the moment the two disagree on accepting it. Reads come from the kernel, so the proxier's
 * full syncs and the packet tracer see what the kernel lists back; the fake is kept for the
 * partial-vs-cold-start comparison. After each step the kernel's tables are compared with the
 * fake's. Only for a test network namespace: it rewrites the `kube-proxy` tables.
 *
 * @module
 */
import assert from "node:assert/strict";
import { openNftables } from "../../ffi/nftables/client.ts";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import {
  type Chain,
  type Element,
  type Family,
  type Map as NftMap,
  type NftablesClient,
  NftablesError,
  type Rule,
  type Set as NftSet,
  type TableState,
  Transaction,
} from "../../ffi/nftables/types.ts";
import type { IpFamily } from "../../net/family.ts";
import { TABLE } from "../../proxier/nftables/names.ts";
import { summarize } from "../contract/nftables_cases.ts";
import type { FuzzOptions } from "./property.ts";

/** Runs every transaction on the kernel and on a fake; both must accept it, or both refuse it. */
export class TeeClient implements NftablesClient {
  readonly fake: MemoryNftables;
  /** Transactions the kernel accepted, and their operations. */
  txs = 0;
  ops = 0;

  constructor(readonly real: NftablesClient) {
    this.fake = new MemoryNftables(real.family, real.table);
  }
  get family(): Family {
    return this.real.family;
  }
  get table(): string {
    return this.real.table;
  }
  async run(tx: Transaction): Promise<void> {
    let fe: unknown, re: unknown;
    await this.fake.run(tx).catch((e) => (fe = e));
    await this.real.run(tx).catch((e) => (re = e));
    if (re !== undefined) {
      // The kernel refusing a transaction the agent built is the failure this test looks for.
      throw new Error(
        `the kernel refused a ${tx.size}-operation transaction: ${String(re)}` +
          (fe === undefined ? " (MemoryNftables accepted it)" : `; MemoryNftables: ${String(fe)}`),
      );
    }
    if (fe !== undefined) {
      throw new Error(`MemoryNftables refused a transaction the kernel accepted: ${String(fe)}`);
    }
    this.txs++;
    this.ops += tx.size;
  }
  async check(tx: Transaction): Promise<void> {
    await this.real.check(tx);
  }
  list(): Promise<TableState | null> {
    return this.real.list();
  }
  listChains(): Promise<string[]> {
    return this.real.listChains();
  }
  listElements(kind: "set" | "map", name: string): Promise<Element[]> {
    return this.real.listElements(kind, name);
  }
  listSets(): Promise<(NftSet | NftMap)[]> {
    return this.real.listSets();
  }
  listChain(name: string): Promise<{ chain: Chain; rules: Rule[] } | null> {
    return this.real.listChain(name);
  }
  getElement(kind: "set" | "map", name: string, key: string[]): Promise<Element | null> {
    return this.real.getElement(kind, name, key);
  }
  close(): void {
    this.real.close();
  }
}

/** Deletes the table if it exists. */
async function drop(c: NftablesClient): Promise<void> {
  try {
    await c.run(new Transaction().delete({ kind: "table" }));
  } catch (e) {
    if (!(e instanceof NftablesError && e.notFound)) throw e;
  }
}

/**
 * Fuzz options that program the kernel of this network namespace (both `kube-proxy` tables,
 * dropped first) and compare its tables with the fake's after every step. `close()` drops them.
 */
export async function kernelFuzzOptions(): Promise<{
  opts: Pick<FuzzOptions, "clients" | "fakes" | "afterStep">;
  tees: Record<IpFamily, TeeClient>;
  close: () => Promise<void>;
}> {
  if (Deno.env.get("KNP_IN_TEST_NETNS") !== "1") {
    throw new Error("kernel fuzzing rewrites the kube-proxy tables: run it in a test namespace");
  }
  const tees = {
    4: new TeeClient(openNftables("ip", TABLE)),
    6: new TeeClient(openNftables("ip6", TABLE)),
  };
  for (const f of [4, 6] as const) await drop(tees[f].real);
  return {
    tees,
    opts: {
      clients: tees,
      fakes: { 4: tees[4].fake, 6: tees[6].fake },
      afterStep: async (step) => {
        for (const f of [4, 6] as const) {
          assert.deepEqual(
            summarize(await tees[f].real.list()),
            summarize(tees[f].fake.state()),
            `step ${step}: the kernel's IPv${f} table differs from MemoryNftables'`,
          );
        }
      },
    },
    close: async () => {
      for (const f of [4, 6] as const) {
        await drop(tees[f].real);
        tees[f].close();
      }
    },
  };
}
