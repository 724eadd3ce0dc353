/**
 * The real {@link NftablesClient}. Writes go one of two ways, chosen in
 * route.ts: an element-only transaction as one nf_tables netlink batch
 * (netlink/writer.ts, over ffi/netlink), anything else, and every dry run,
 * as nft script text (`renderScript`) handed to ONE libnftables
 * `nft_run_cmd_from_buffer` call. Either is one netlink batch: the kernel
 * applies all of it or none of it. Both run off the event loop
 * (`nonblocking` FFI), and calls on one client are serialised. Reads are
 * libnftables listings, except the rule counts (a netlink rule dump) and
 * single-element lookups (netlink GETSETELEM). Failures are
 * {@link NftablesError}s carrying the kernel's errno.
 *
 * Finding the failed command (only on failure): libnftables 1.0.6 prints no
 * line number for buffer input (it echoes the buffer's FIRST line, with the
 * caret columns of the failing line). So the client dry-runs the same script
 * once more as a file (an anonymous memfd), which does print
 * `FILE:LINE:COL`; on a folded element line the caret column names the
 * element. Because 1.0.6 misplaces that caret in very long element lines,
 * a guess is kept only when two dry runs confirm it is the FIRST failing op;
 * otherwise the client bisects lines, then that line's elements, with dry
 * runs over op prefixes. Measured (2k chains, 10k rules, 100k elements): a
 * bad rule is named in ~2 s extra, a bad element in ~15 s (bisection).
 *
 * Other programs' sets: libnftables 1.0.x loads every set of every table
 * before most commands and crashes (in this process) on a `typeof`
 * annotation it cannot decode, as newer nft versions write. So before such a
 * command the namespace's sets are screened over plain netlink
 * (netlink/set_screen.ts): with a hazard present, transactions fail with an
 * error naming the set, lookups list only this table, and a table delete
 * goes over plain netlink.
 *
 * What `list()` round-trips exactly (measured on 1.0.6, kernel 6.18):
 * chain names, base-chain type/hook/priority/policy, chain comments, set and
 * map names, key and data types, flags (`dynamic` included), default
 * timeouts, comments, and elements (key parts, value parts, comments; ports
 * and protocols as written when given numerically / by name). Rule bodies
 * come back in nft's normalised form: what nft itself would print, e.g.
 * `counter` becomes `counter packets 0 bytes 0`, `0x4000` becomes
 * `0x00004000`, while `numgen random mod 2 0` and
 * `ip daddr . meta l4proto . th dport vmap @m` come back unchanged; a
 * trailing `comment "..."` is split off into `Rule.comment`. Element order is
 * the kernel's (hash order), not insertion order. Element timeouts, expiry
 * and counters are not modelled and are dropped. A listing torn by a hash
 * set's resize is read again (torn_listing.ts).
 *
 * @module
 */
import { renderOperation, renderScript } from "./script.ts";
import { type ErrorRecord, locateFailedOp, parseErrorText } from "./error_locate.ts";

export {
  elementAtColumn,
  type ErrorRecord,
  guessFailedOp,
  type LineSpan,
  parseErrorText,
  scriptLines,
} from "./error_locate.ts";
import {
  type Chain,
  type Element,
  type Family,
  type Map as NftMap,
  type NftablesClient,
  NftablesError,
  type Operation,
  type Rule,
  type Set as NftSet,
  type TableState,
  Transaction,
} from "./types.ts";
import { NftContext, type NftLib, OutputFlag, type RunResult } from "./libnftables.ts";
import { parseChainNames, parseTableListing } from "./list_parser.ts";
import { readWholeListing } from "./torn_listing.ts";
import { RawElementWriter } from "./netlink/writer.ts";
import type { QuietWrites } from "./netlink/generation.ts";
import { deleteTableOverNetlink, libnftablesHazard } from "./netlink/set_dump.ts";
import { dumpRuleCounts } from "./netlink/rule_dump.ts";
import { lookupElement } from "./netlink/element_get.ts";
import { newWatchedContext, noteOwnSockets } from "./context_sockets.ts";
import { strerror } from "../libc.ts";
import { ENOENT, errnoOfNftMessage } from "../errno.ts";
import { scriptRoute, writeRoute } from "./route.ts";
import { canonicalIP } from "../../net/ip.ts";

const FAMILIES: readonly Family[] = ["ip", "ip6", "inet"];
/** Output flags of every context: handles, numeric priorities (what the listing parser expects). */
const BASE_FLAGS = OutputFlag.HANDLE | OutputFlag.NUMERIC_PRIO;
/** nft identifiers: what the scanner accepts unquoted. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_./-]*$/;

/** Options for {@link openNftables}. */
export interface OpenOptions {
  /** An already opened library (tests); default: libnftables.so.1 from the library path. */
  lib?: NftLib;
  /**
   * Send element-only transactions as raw netlink batches (netlink/), not
   * through libnftables' parser. Default: on, unless
   * KUBE_NFT_PROXY_RAW_ELEMENTS=0.
   */
  rawElements?: boolean;
}

/** Whether `ops` add sets or maps. */
function declaresSets(ops: readonly Operation[]): boolean {
  return ops.some((o) => o.verb === "add" && (o.obj.kind === "set" || o.obj.kind === "map"));
}

function rawDefault(): boolean {
  try {
    return Deno.env.get("KUBE_NFT_PROXY_RAW_ELEMENTS") !== "0";
  } catch {
    return true;
  }
}

/**
 * Opens a client for table `table` of `family`, backed by its own libnftables
 * context. Throws LibraryNotFoundError when libnftables.so.1 is missing, and
 * TypeError for an invalid family or table name.
 */
export function openNftables(
  family: Family,
  table: string,
  opts: OpenOptions = {},
): NftablesClient {
  if (!FAMILIES.includes(family)) {
    throw new TypeError(
      `unsupported nftables family "${family}": use one of ${FAMILIES.join(", ")}`,
    );
  }
  if (!IDENTIFIER.test(table)) {
    throw new TypeError(
      `invalid nftables table name "${table}": use letters, digits, "_", "-", "." and "/", ` +
        `starting with a letter or "_"`,
    );
  }
  const ctx = newWatchedContext(opts.lib, BASE_FLAGS);
  const raw = opts.rawElements ?? rawDefault() ? new RawElementWriter(family, table) : undefined;
  return new LibNftablesClient(family, table, ctx, raw);
}

class LibNftablesClient implements NftablesClient {
  #ctx: NftContext;
  #tail: Promise<unknown> = Promise.resolve();
  #pending = 0;
  #closing = false;
  #raw: RawElementWriter | undefined;
  /** Whether the scans after the first libnftables command / raw batch ran. */
  #seen = { lib: false, raw: false };

  constructor(
    readonly family: Family,
    readonly table: string,
    ctx: NftContext,
    raw?: RawElementWriter,
  ) {
    this.#ctx = ctx;
    this.#raw = raw;
  }

  /** Runs `fn` after every earlier call on this client has settled. */
  #enqueue<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closing) return Promise.reject(new Error("nftables client is closed"));
    this.#pending++;
    const result = this.#tail.then(fn, fn);
    this.#tail = result.then(
      () => this.#settle(),
      () => this.#settle(),
    );
    return result;
  }

  #settle(): void {
    if (--this.#pending === 0 && this.#closing) this.#ctx.free();
  }

  run(tx: Transaction): Promise<void> {
    return this.#apply(tx, false);
  }

  quietWith(q: QuietWrites): void {
    if (this.#raw !== undefined) this.#raw.quiet = q;
  }

  rehearse(tx: Transaction): boolean {
    const raw = this.#raw;
    if (
      raw === undefined || writeRoute(tx.ops, { rawElements: true, dryRun: false }) !== "elements"
    ) {
      return false;
    }
    return raw.unknownTargets(tx.ops).length === 0 && raw.rehearse(tx.ops);
  }

  check(tx: Transaction): Promise<void> {
    return this.#apply(tx, true);
  }

  #apply(tx: Transaction, dryRun: boolean): Promise<void> {
    if (!(tx instanceof Transaction) && !Array.isArray((tx as Transaction)?.ops)) {
      return Promise.reject(new TypeError("run/check needs a Transaction"));
    }
    const ops = tx.ops.slice(); // later pushes to tx must not change what we apply
    if (ops.length === 0) return Promise.resolve();
    const raw = this.#raw;
    const route = writeRoute(ops, { rawElements: raw !== undefined, dryRun });
    if (route === "elements" && raw !== undefined) {
      const batch = raw.unknownTargets(ops).length === 0 ? raw.encode(ops) : undefined;
      return this.#enqueue(async () => {
        if (batch === undefined && raw.unknownTargets(ops).length > 0) {
          raw.learnDeclarations(await this.#declarations());
        }
        const b = batch ?? raw.encode(ops);
        if (b !== undefined && await this.#sendRaw(raw, b)) return;
        // Not encodable, or refused (nothing applied: one batch): libnftables
        // does it, and names the failing element if it fails too.
        await this.#runScript(ops, false);
      });
    }
    let script: string;
    try {
      script = renderScript(this.family, this.table, ops);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.#enqueue(async () => {
      const route = scriptRoute(ops, dryRun, this.#hazard());
      // --cleanup still works with a hazard: the table goes over plain netlink.
      if (route.via === "netlink-table-delete") return await this.#deleteTableRaw();
      if (route.via === "refused") throw new NftablesError(route.why);
      const res = await this.#exec(script, dryRun);
      if (res.rc !== 0) throw await this.#explain(ops, script, res.error);
      if (!dryRun) raw?.learn(ops);
      // The screen parses each set's userdata once: have it see the new sets now, off the path
      // of the next change, whose libnftables call would otherwise pay for it.
      if (!dryRun && declaresSets(ops)) setTimeout(() => this.#hazard(), 0);
    });
  }

  /**
   * Why libnftables must not run now (a set anywhere in the namespace whose
   * userdata it would crash on: it loads every table's sets before most
   * commands, in this process), or undefined.
   */
  #hazard(): string | undefined {
    return libnftablesHazard();
  }

  /** Deletes this client's table over plain netlink (inside the queue). */
  async #deleteTableRaw(): Promise<void> {
    const errno = await deleteTableOverNetlink(this.family, this.table);
    if (errno !== 0) {
      const what = `delete table ${this.family} ${this.table}`;
      throw new NftablesError(`${what}: ${strerror(errno)}`, undefined, undefined, errno);
    }
  }

  /** Renders and runs `ops` through libnftables (inside the queue). */
  async #runScript(ops: Operation[], dryRun: boolean): Promise<void> {
    const route = scriptRoute(ops, dryRun, this.#hazard());
    if (route.via === "netlink-table-delete") return await this.#deleteTableRaw();
    if (route.via === "refused") throw new NftablesError(route.why);
    const script = renderScript(this.family, this.table, ops);
    const res = await this.#exec(script, dryRun);
    if (res.rc !== 0) throw await this.#explain(ops, script, res.error);
  }

  /**
   * Set and map declarations, read inside the queue (the public listSets
   * enqueues itself). Two terse listings that load no elements, unlike a
   * listing of the table, which loads every element first (seconds and
   * hundreds of MB at 30k Services). `list maps` loads every table's sets of
   * the family, though: with a set there that libnftables would crash on
   * (hazard()), the table's own listing, which loads no other table.
   */
  async #declarations(): Promise<(NftSet | NftMap)[]> {
    const cmds = this.#hazard() === undefined
      ? [`list sets table ${this.family} ${this.table}`, `list maps ${this.family}`]
      : [`list table ${this.family} ${this.table}`];
    const out: (NftSet | NftMap)[] = [];
    for (const cmd of cmds) {
      this.#ctx.setOutputFlags(BASE_FLAGS | OutputFlag.TERSE);
      let res: RunResult;
      try {
        res = await this.#run(cmd + "\n");
      } finally {
        this.#ctx.setOutputFlags(BASE_FLAGS);
      }
      if (res.rc !== 0) continue;
      const state = parseTableListing(res.output, this.family, this.table);
      for (const { set } of state?.sets.values() ?? []) out.push(set);
      for (const { map } of state?.maps.values() ?? []) out.push(map);
    }
    return out;
  }

  /** Runs a command buffer on the context; the first one is followed by a scan for its socket. */
  async #run(script: string): Promise<RunResult> {
    try {
      return await this.#ctx.run(script);
    } finally {
      if (!this.#seen.lib) {
        this.#seen.lib = true;
        noteOwnSockets();
      }
    }
  }

  /** Sends a raw batch; the first one opens the writer's socket, so a scan follows. */
  async #sendRaw(raw: RawElementWriter, batch: Parameters<RawElementWriter["send"]>[0]) {
    try {
      return await raw.send(batch);
    } finally {
      if (!this.#seen.raw) {
        this.#seen.raw = true;
        noteOwnSockets();
      }
    }
  }

  /** Runs a script, in dry-run mode if asked; the flag is always reset. */
  async #exec(script: string, dryRun: boolean): Promise<RunResult> {
    if (!dryRun) return await this.#run(script);
    this.#ctx.setDryRun(true);
    try {
      return await this.#run(script);
    } finally {
      this.#ctx.setDryRun(false);
    }
  }

  /** Builds the error for a failed script, locating the failed op where it can. */
  async #explain(
    ops: readonly Operation[],
    script: string,
    errorText: string,
  ): Promise<NftablesError> {
    const records = parseErrorText(errorText);
    const message = records.length === 0
      ? "libnftables failed without an error message"
      : records.map((r) => r.message).join("\n");
    const errno = errnoOfNftMessage(message);
    const idx = await locateFailedOp(ops, script, records[0], this.#probe);
    if (idx === undefined) return new NftablesError(message, undefined, undefined, errno);
    const cmd = renderOperation(this.family, this.table, ops[idx]);
    return new NftablesError(message, idx, cmd, errno);
  }

  /** The dry runs that locate a failure, on this client's context (inside the queue). */
  #probe = {
    fails: async (ops: readonly Operation[]): Promise<boolean> => {
      const res = await this.#exec(renderScript(this.family, this.table, ops), true);
      return res.rc !== 0;
    },
    dryRunAsFile: async (script: string): Promise<ErrorRecord | undefined> => {
      this.#ctx.setDryRun(true);
      try {
        const res = await this.#ctx.runAsFile(script);
        return res.rc === 0 ? undefined : parseErrorText(res.error)[0];
      } catch {
        return undefined; // no memfd here: fall back to bisection
      } finally {
        this.#ctx.setDryRun(false);
      }
    },
  };

  /** Runs a listing command; returns null when the object does not exist. */
  #listing(cmd: string): Promise<string | null> {
    return this.#enqueue(async () => {
      const res = await this.#run(cmd + "\n");
      if (res.rc === 0) return res.output;
      const message = parseErrorText(res.error).map((r) => r.message).join("\n") || `${cmd} failed`;
      const errno = errnoOfNftMessage(message);
      if (errno === ENOENT) return null;
      throw new NftablesError(message, undefined, undefined, errno);
    });
  }

  async list(): Promise<TableState | null> {
    return await readWholeListing(
      () => this.#listing(`list table ${this.family} ${this.table}`),
      (text) => parseTableListing(text, this.family, this.table),
    );
  }

  async listChains(): Promise<string[]> {
    // `list chains` takes no table: list the family's and keep ours (no rules are fetched).
    const text = await this.#listing(`list chains ${this.family}`);
    return text === null ? [] : parseChainNames(text, this.family, this.table);
  }

  async listElements(kind: "set" | "map", name: string): Promise<Element[]> {
    if (kind !== "set" && kind !== "map") {
      throw new TypeError(`listElements: kind must be "set" or "map", not "${kind}"`);
    }
    if (!IDENTIFIER.test(name)) throw new TypeError(`invalid ${kind} name "${name}"`);
    const state = await readWholeListing(
      () => this.#listing(`list ${kind} ${this.family} ${this.table} ${name}`),
      (text) => parseTableListing(text, this.family, this.table),
    );
    const entry = kind === "set" ? state?.sets.get(name) : state?.maps.get(name);
    if (entry === undefined) {
      throw new NftablesError(
        `${kind} ${this.family} ${this.table} ${name} does not exist (No such file or directory)`,
        undefined,
        undefined,
        ENOENT,
      );
    }
    return entry.elements;
  }

  async listChain(name: string): Promise<{ chain: Chain; rules: Rule[] } | null> {
    if (!IDENTIFIER.test(name)) throw new TypeError(`invalid chain name "${name}"`);
    const text = await this.#listing(`list chain ${this.family} ${this.table} ${name}`);
    if (text === null) return null;
    return parseTableListing(text, this.family, this.table)?.chains.get(name) ?? null;
  }

  async counterPackets(name: string): Promise<number | undefined> {
    if (!IDENTIFIER.test(name)) throw new TypeError(`invalid counter name "${name}"`);
    const text = await this.#listing(`list counter ${this.family} ${this.table} ${name}`);
    // `counter NAME { packets N bytes M }`, as nft lists a named counter.
    const m = text === null ? null : /\bpackets (\d+)/.exec(text);
    return m ? Number(m[1]) : undefined;
  }

  async getElement(kind: "set" | "map", name: string, key: string[]): Promise<Element | null> {
    if (!IDENTIFIER.test(name)) throw new TypeError(`invalid ${kind} name "${name}"`);
    // One kernel lookup over plain netlink: libnftables' `get element` loads every element of
    // every set first (seconds on a big node, for each lookup of a `trace`).
    const raw = await this.#lookupRaw(kind, name, key);
    if (raw !== undefined) return raw;
    if (this.#hazard() !== undefined) {
      // `get element` loads every table's sets; listing only this one does not.
      const canon = (parts: readonly string[]) =>
        parts.flatMap((p) => p.split(" . ")).map((p) => canonicalIP(p) ?? p).join(" . ");
      const want = canon(key);
      return (await this.listElements(kind, name)).find((e) => canon(e.key) === want) ?? null;
    }
    const text = await this.#listing(
      `get element ${this.family} ${this.table} ${name} { ${key.join(" . ")} }`,
    );
    const st = text === null ? null : parseTableListing(text, this.family, this.table);
    const entry = kind === "set" ? st?.sets.get(name) : st?.maps.get(name);
    return entry?.elements[0] ?? null;
  }

  listSets(): Promise<(NftSet | NftMap)[]> {
    return this.#enqueue(() => this.#declarations());
  }

  async listRules(): Promise<Map<string, { chain: Chain; rules: Rule[] }>> {
    // Terse: libnftables still loads every element first (as for `list chain`), once.
    const text = await this.#enqueue(async () => {
      this.#ctx.setOutputFlags(BASE_FLAGS | OutputFlag.TERSE);
      try {
        const res = await this.#run(`list table ${this.family} ${this.table}\n`);
        return res.rc === 0 ? res.output : null;
      } finally {
        this.#ctx.setOutputFlags(BASE_FLAGS);
      }
    });
    return text === null
      ? new Map()
      : parseTableListing(text, this.family, this.table)?.chains ?? new Map();
  }

  /** An element through the raw path, or undefined when it cannot be looked up that way. */
  async #lookupRaw(
    kind: "set" | "map",
    name: string,
    key: string[],
  ): Promise<Element | null | undefined> {
    const raw = this.#raw;
    if (raw === undefined) return undefined;
    try {
      if (raw.layoutOf(name) === undefined) raw.learnDeclarations(await this.listSets());
      const layout = raw.layoutOf(name);
      return layout ? lookupElement(this.family, this.table, kind, name, layout, key) : undefined;
    } catch {
      return undefined; // no libmnl, an unreadable set, a kernel error: libnftables decides
    }
  }

  /** Rules per chain, from a netlink rule dump (libnftables would load every element first). */
  ruleCounts(): Promise<ReadonlyMap<string, number>> {
    return this.#enqueue(() => Promise.resolve(dumpRuleCounts(this.family, this.table)));
  }

  close(): void {
    if (this.#closing) return;
    this.#closing = true;
    this.#raw?.close();
    // A call in flight still uses the context on a worker thread: free it after.
    if (this.#pending === 0) this.#ctx.free();
  }
}
