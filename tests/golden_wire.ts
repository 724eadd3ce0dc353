/**
 * Test support for the golden changes (tests/golden/<name>.changes.txt):
 * what production would send for each transaction of a sync. Each
 * transaction takes the route ffi/nftables/route.ts picks (raw element
 * writes on, as in production): element-only ones are encoded by the
 * production writer (ffi/nftables/netlink/writer.ts, without a socket) and
 * decoded back into nft-like lines by batch_decode_testing.ts; the others
 * stay nft script, as libnftables would get it.
 *
 * @module
 */
import { nftFamily } from "../net/family.ts";
import { MemoryNftables } from "../ffi/nftables/memory/client.ts";
import { renderScript } from "../ffi/nftables/script.ts";
import { writeRoute } from "../ffi/nftables/route.ts";
import { RawElementWriter } from "../ffi/nftables/netlink/writer.ts";
import { decodeBatch } from "../ffi/nftables/netlink/batch_decode_testing.ts";
import type { ProxierConfig, ProxyState } from "../proxier/model.ts";
import { TABLE } from "../proxier/nftables/names.ts";
import { nodeProxier, noStaleReport, RecordingClient, syncAll } from "./programmed.ts";
import type { Transaction } from "../ffi/nftables/types.ts";

/** A client recording, for every transaction, what production would send for it. */
export class WireRecorder extends RecordingClient {
  /** The recorded lines, one transaction after another. */
  lines: string[] = [];
  readonly #writer: RawElementWriter;

  constructor(fake: MemoryNftables) {
    super(fake);
    this.#writer = new RawElementWriter(fake.family, fake.table);
  }

  override async run(tx: Transaction): Promise<void> {
    const ops = tx.ops.slice();
    if (ops.length === 0) return;
    const n = this.txs.length + 1;
    const w = this.#writer;
    if (writeRoute(ops, { rawElements: true, dryRun: false }) === "elements") {
      // As the client does: unknown sets are read from the kernel first.
      if (w.unknownTargets(ops).length > 0) w.learnDeclarations(await this.fake.listSets());
      const batch = w.encode(ops);
      if (batch !== undefined) {
        const decoded = decodeBatch(batch.bytes, (s) => w.layoutOf(s) ?? undefined);
        this.lines.push(`# transaction ${n}: netlink batch, ${ops.length} elements`, ...decoded);
        return await super.run(tx);
      }
      this.lines.push(`# transaction ${n}: elements not encodable, libnftables script instead`);
    } else {
      this.lines.push(`# transaction ${n}: libnftables script, ${ops.length} operations`);
    }
    this.lines.push(...renderScript(this.family, this.table, ops).trimEnd().split("\n"));
    await super.run(tx);
    w.learn(ops);
  }
}

/** One partial change after the cold start: a title and the state after it. */
export interface GoldenChange {
  /** What changed, in words (the header of its section). */
  what: string;
  /** The state after the change, and which Service ports changed or went away. */
  apply(state: ProxyState): { state: ProxyState; changed: string[]; deleted?: string[] };
}

/**
 * Cold-starts `state`, then applies `changes` one after another (each a
 * partial sync) and returns what each of those syncs would send, as text.
 */
export async function changesWire(
  state: ProxyState,
  config: ProxierConfig,
  changes: readonly GoldenChange[],
): Promise<string> {
  const rec = new WireRecorder(new MemoryNftables(nftFamily(state.family), TABLE));
  const proxier = await nodeProxier(state, config, rec);
  await syncAll(proxier, state);
  const out: string[] = [];
  for (const c of changes) {
    rec.lines = [];
    const next = c.apply(state);
    state = next.state;
    await proxier.sync({
      state,
      changed: new Set(next.changed),
      deleted: new Set(next.deleted ?? []),
      stale: noStaleReport(),
    });
    out.push(`## ${c.what}`, ...(rec.lines.length > 0 ? rec.lines : ["# nothing sent"]), "");
  }
  return out.join("\n");
}
