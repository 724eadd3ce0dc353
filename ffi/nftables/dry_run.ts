/**
 * An {@link NftablesClient} that prints transactions instead of applying
 * them: the backend of `--dry-run`. It remembers nothing, so every sync it
 * sees looks like a cold start.
 *
 * @module
 */
import { renderScript } from "./script.ts";
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
} from "./types.ts";

/** Prints each transaction as an nft script to `write`. */
export class DryRunNftables implements NftablesClient {
  /** A client of `family`/`table` that prints each transaction through `write` and applies none. */
  constructor(
    readonly family: Family,
    readonly table: string,
    write: (text: string) => void = (t) => console.log(t),
  ) {
    this.#write = write;
  }

  readonly #write: (text: string) => void;

  run(tx: Transaction): Promise<void> {
    if (tx.size > 0) {
      this.#write(
        `# dry run: ${tx.size} operations on ${this.family} ${this.table}\n` +
          renderScript(this.family, this.table, tx.ops),
      );
    }
    return Promise.resolve();
  }

  check(_tx: Transaction): Promise<void> {
    return Promise.resolve();
  }

  list(): Promise<TableState | null> {
    return Promise.resolve(null);
  }

  listChains(): Promise<string[]> {
    return Promise.resolve([]);
  }

  listElements(_kind: "set" | "map", _name: string): Promise<Element[]> {
    return Promise.resolve([]);
  }

  listSets(): Promise<(NftSet | NftMap)[]> {
    return Promise.resolve([]);
  }

  listChain(_name: string): Promise<{ chain: Chain; rules: Rule[] } | null> {
    return Promise.resolve(null);
  }

  getElement(_kind: "set" | "map", _name: string, _key: string[]): Promise<Element | null> {
    return Promise.resolve(null);
  }

  close(): void {}
}
