/**
 * Typed nftables objects and transactions, modelled on knftables.
 *
 * A {@link Transaction} is an ordered list of operations on one table,
 * applied by an {@link NftablesClient} as one atomic kernel transaction. The
 * real client (client.ts) sends it one of two ways, chosen in route.ts: an
 * element-only transaction as one nf_tables netlink batch, anything else as
 * nft script text through libnftables (not JSON: libnftables 1.0.6 JSON
 * input cannot express dynamic sets, typeof, or comments).
 * {@link NftablesError} carries the kernel's errno either way.
 *
 * @module
 */
import { EEXIST, ENOENT, errnoOfNftMessage } from "../errno.ts";
import type { QuietWrites } from "./netlink/generation.ts";

/** nftables address family of a table. */
export type Family = "ip" | "ip6" | "inet";

/** Netfilter hooks a base chain can attach to. */
export type Hook = "prerouting" | "input" | "forward" | "output" | "postrouting";

/** Base chain types. */
export type ChainType = "filter" | "nat" | "route";

/** A table. The family and name come from the client. */
export interface Table {
  /** Discriminant. */
  kind: "table";
  /** The table's comment. */
  comment?: string;
}

/** A chain; a base chain when `type`, `hook` and `priority` are set. */
export interface Chain {
  /** Discriminant. */
  kind: "chain";
  /** The chain's name. */
  name: string;
  /** Base chain type. */
  type?: ChainType;
  /** Base chain hook. */
  hook?: Hook;
  /** Numeric priority, e.g. -100 for dstnat in ip/ip6. */
  priority?: number;
  /** Base chain policy (default accept). */
  policy?: "accept" | "drop";
  /** The chain's comment. */
  comment?: string;
}

/** A rule: `rule` is an nft syntax rule body, e.g. `ip daddr 1.2.3.4 drop`. */
export interface Rule {
  /** Discriminant. */
  kind: "rule";
  /** The chain it is in. */
  chain: string;
  /** The rule body, nft syntax. */
  rule: string;
  /** The rule's comment. */
  comment?: string;
  /** Kernel handle: required for replace/delete, filled in by list. */
  handle?: number;
  /** With insert/add: position relative to the rule with this handle. */
  position?: number;
}

/** Flags a set or map may carry. */
export type SetFlag = "constant" | "interval" | "timeout" | "dynamic";

/**
 * A named set. `type` is a key type, e.g. `ipv4_addr . inet_proto . inet_service`,
 * or `typeof ` and a key expression, e.g. `typeof ip daddr . th dport`.
 */
export interface Set {
  /** Discriminant. */
  kind: "set";
  /** The set's name. */
  name: string;
  /** Key type, or `typeof ` and a key expression. */
  type: string;
  /** Set flags. */
  flags?: SetFlag[];
  /** Default element timeout, seconds. */
  timeout?: number;
  /** The set's comment. */
  comment?: string;
}

/**
 * A named map: `type` is the key type, `dataType` the value type (`verdict`,
 * `ipv4_addr . inet_service`, ...). With a `typeof ` key type, `dataType` is
 * an expression too (`ip daddr . th dport`).
 */
export interface Map {
  /** Discriminant. */
  kind: "map";
  /** The map's name. */
  name: string;
  /** Key type, or `typeof ` and a key expression. */
  type: string;
  /** Value type (or expression, with a `typeof ` key). */
  dataType: string;
  /** Map flags. */
  flags?: SetFlag[];
  /** Default element timeout, seconds. */
  timeout?: number;
  /** The map's comment. */
  comment?: string;
}

/**
 * An element of a set (`set`) or map (`map`). `key` holds the parts of a
 * (possibly concatenated) key, `value` the parts of a map value such as
 * `["goto service-X"]` or `["10.0.0.1", "80"]`.
 */
export interface Element {
  /** Discriminant. */
  kind: "element";
  /** The set it belongs to (or `map`). */
  set?: string;
  /** The map it belongs to (or `set`). */
  map?: string;
  /** The key's parts. */
  key: string[];
  /** A map element's value parts. */
  value?: string[];
  /** The element's comment. */
  comment?: string;
}

/**
 * A named counter object (`counter NAME { packets N bytes M }`), which rules update with
 * `counter name "NAME"`; its values are read with {@link NftablesClient.counterPackets}.
 */
export interface Counter {
  /** Discriminant. */
  kind: "counter";
  /** The counter's name. */
  name: string;
}

/** Any object a transaction can operate on. */
export type NftObject = Table | Chain | Rule | Set | Map | Element | Counter;

/** Transaction verbs. `create` fails if the object exists; `add` does not. */
export type Verb = "add" | "create" | "insert" | "replace" | "flush" | "delete";

/** One queued operation. */
export interface Operation {
  /** What to do. */
  verb: Verb;
  /** To what. */
  obj: NftObject;
}

/** An ordered batch of operations on one table, applied atomically. */
export class Transaction {
  /** The queued operations, in order. */
  readonly ops: Operation[] = [];

  /** Adds an object, leaving it alone if it exists. */
  add(obj: NftObject): this {
    return this.#push("add", obj);
  }
  /** Creates an object, failing if it exists. */
  create(obj: NftObject): this {
    return this.#push("create", obj);
  }
  /** Inserts a rule at the start of its chain (or before `position`). */
  insert(obj: Rule): this {
    return this.#push("insert", obj);
  }
  /** Replaces the rule with `obj.handle`. */
  replace(obj: Rule): this {
    return this.#push("replace", obj);
  }
  /** Empties a table, chain, set or map. */
  flush(obj: Table | Chain | Set | Map): this {
    return this.#push("flush", obj);
  }
  /** Deletes an object (a rule by handle, an element by key). */
  delete(obj: NftObject): this {
    return this.#push("delete", obj);
  }

  /** Number of queued operations. */
  get size(): number {
    return this.ops.length;
  }

  /** Queues one operation. */
  #push(verb: Verb, obj: NftObject): this {
    this.ops.push({ verb, obj });
    return this;
  }
}

/**
 * A table's contents as read back from the kernel or a fake. Chains, sets and
 * maps are keyed by name; rules are in chain order.
 */
export interface TableState {
  /** The table's family. */
  family: Family;
  /** The table's name. */
  name: string;
  /** The table's comment. */
  comment?: string;
  /** Chains with their rules, by name. */
  chains: globalThis.Map<string, { chain: Chain; rules: Rule[] }>;
  /** Sets with their elements, by name. */
  sets: globalThis.Map<string, { set: Set; elements: Element[] }>;
  /** Maps with their elements, by name. */
  maps: globalThis.Map<string, { map: Map; elements: Element[] }>;
}

/** A client bound to one table (`family` + `table`), like knftables.Interface. */
export interface NftablesClient {
  /** The table's family. */
  readonly family: Family;
  /** The table's name. */
  readonly table: string;
  /** Applies the transaction as one atomic kernel transaction. Throws {@link NftablesError}. */
  run(tx: Transaction): Promise<void>;
  /** Validates the transaction (kernel dry run) without committing. Throws {@link NftablesError}. */
  check(tx: Transaction): Promise<void>;
  /** Reads the whole table back, or null when it does not exist. Expensive on large tables. */
  list(): Promise<TableState | null>;
  /** Names of the table's chains (cheap: no rules), or [] when the table does not exist. */
  listChains(): Promise<string[]>;
  /** Elements of one set or map. */
  listElements(kind: "set" | "map", name: string): Promise<Element[]>;
  /** Declarations of the table's sets and maps, without elements (cheap), or [] without the table. */
  listSets(): Promise<(Set | Map)[]>;
  /** One chain with its rules, or null when it does not exist. */
  listChain(name: string): Promise<{ chain: Chain; rules: Rule[] } | null>;
  /**
   * Every chain with its rules, by name ([] without the table), in one listing.
   * Optional; where libnftables loads every element before any chain listing,
   * reading many chains this way costs one load instead of one each.
   */
  listRules?(): Promise<globalThis.Map<string, { chain: Chain; rules: Rule[] }>>;
  /** The packets a named counter has counted, or undefined when the table or counter is missing. */
  counterPackets?(name: string): Promise<number | undefined>;
  /**
   * The number of rules in each chain of the table (chains without rules are
   * absent; empty when the table does not exist). Cheap however many
   * elements the table holds. Optional: a full sync without it cannot see
   * rules added to its chains.
   */
  ruleCounts?(): Promise<ReadonlyMap<string, number>>;
  /**
   * The element of a set or map with this key (one lookup, however big the
   * set), or null when there is none.
   */
  getElement(kind: "set" | "map", name: string, key: string[]): Promise<Element | null>;
  /**
   * Pause change notifications around large element batches through `q` (netlink/generation.ts).
   * Optional: clients without a raw element path never pause them.
   */
  quietWith?(q: QuietWrites): void;
  /**
   * Encodes the transaction as {@link run} would, and sends nothing: warms up the encoder
   * (proxier/nftables/rehearsal.ts). True when it was encoded; transactions that would go
   * through libnftables are not. Optional: clients without a raw element path have nothing to warm.
   */
  rehearse?(tx: Transaction): boolean;
  /** Releases native resources. */
  close(): void;
}

/**
 * A failed transaction (nothing of it was applied), or a failed read. Its
 * kind is an errno, as in knftables: the netlink paths pass the kernel's,
 * and the libnftables path maps nft's text once (`errnoOfNftMessage`).
 */
export class NftablesError extends Error {
  /** The kernel's errno for this failure, when one is known (2: ENOENT, 17: EEXIST, ...). */
  readonly errno: number | undefined;

  /**
   * A refused transaction, with what the kernel refused where it is known.
   * @param message the error text (libnftables', or ours naming the object).
   * @param failedOperation index into the transaction's ops of the command that failed, when found.
   * @param failedCommand the nft syntax of that command, when found.
   * @param errno the kernel's errno. Omitted, it is read from `message` as nft words it
   *   (for callers that only have text, such as the in-memory nftables).
   */
  constructor(
    message: string,
    readonly failedOperation?: number,
    readonly failedCommand?: string,
    errno?: number,
  ) {
    super(
      failedCommand === undefined ? message : `${message}\n  failing command: ${failedCommand}`,
    );
    this.name = "NftablesError";
    this.errno = errno ?? errnoOfNftMessage(message);
  }

  /** True when the error means the object does not exist (ENOENT). */
  get notFound(): boolean {
    return this.errno === ENOENT;
  }
  /** True when the error means the object already exists (EEXIST). */
  get exists(): boolean {
    return this.errno === EEXIST;
  }
}
