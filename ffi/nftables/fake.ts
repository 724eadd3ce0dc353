/**
 * An in-memory {@link NftablesClient} for one table, in the spirit of
 * knftables' Fake. It applies transactions atomically and rejects what the
 * kernel (with nft 1.0.6 in front of it) rejects, as measured on kernel 6.18:
 *
 * - any op on a missing table except add/create table (ENOENT);
 * - unknown chains, sets, maps, rule handles, elements (ENOENT);
 * - `create` of an existing table, chain, set, map or element (EEXIST);
 * - `add` of an existing chain that differs: regular vs base or another base
 *   chain type (EEXIST), another hook or priority (EOPNOTSUPP); the policy may
 *   change;
 * - `add` of an existing set or map with another type, data type or flags, or
 *   whose name is taken by the other kind (EEXIST);
 * - `add` of an existing map element with another value (EEXIST); the same
 *   value is a no-op (the old comment stays);
 * - jumps/gotos (rules, inline vmaps, verdict-map elements) to missing chains
 *   (ENOENT) or to base chains (EOPNOTSUPP); `@name` of a missing set (ENOENT);
 * - deleting a chain still referenced by a jump/goto or a map element, or a
 *   set/map still referenced by a rule (EBUSY). A chain's rules do not block
 *   its deletion (the kernel deletes them with it) unless one jumps to the
 *   chain itself;
 * - elements that do not fit the set type, prefixes/ranges in a set without
 *   `flags interval`, overlapping intervals;
 * - nft keywords (`dnat`, `counter`, ...) as chain, set or map names;
 * - loops, or jump paths deeper than 15, below a base chain, through rules
 *   and verdict maps (EMLINK; unreachable chains are not checked).
 *
 * `flush table` deletes every rule but keeps chains, sets and elements, like
 * the kernel. Re-adding a set takes its new default timeout. Reads (`state()`,
 * `list()`, `dump()`) return elements in canonical form (`6` -> `tcp`,
 * compressed IPv6, masked prefixes, marks as 0x%08x) and set flags as nft
 * lists them; a `comment "..."` at the end of a rule body becomes the rule's
 * comment. Rule bodies are otherwise kept as written: the kernel normalises
 * some (`mark or 0x4000` lists as `mark | 0x00004000`). Handles come from one per-table counter shared by chains, sets,
 * rules and the anonymous sets inside rules, so on a table built only by
 * successful transactions they match the kernel's. (A transaction the kernel
 * rejects still burns handles; the fake's failures leave the counter alone.)
 *
 * @module
 */
import { formatNftDuration } from "../../net/duration.ts";
import {
  bigIntToBytes,
  formatIPv4Number,
  formatIPv6Bytes,
  ipToBigInt,
  parseIPv4Number,
  parseIPv6Bytes,
} from "../../net/ip.ts";
import { renderOperation } from "./script.ts";
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
  type SetFlag,
  type TableState,
  type Transaction,
} from "./types.ts";

// ---------------------------------------------------------------------------
// Errors

const ENOENT = "No such file or directory";
const EEXIST = "File exists";
const EBUSY = "Device or resource busy";
const EOPNOTSUPP = "Operation not supported";
const EMLINK = "Too many links";

/** The kernel's NFT_JUMP_STACK_SIZE: a chain 16 jumps below a base chain is refused. */
const MAX_JUMP_DEPTH = 16;

/** A validation failure inside one op; run() turns it into an NftablesError. */
class OpError extends Error {}

function fail(errno: string, detail: string): never {
  throw new OpError(`${errno}: ${detail}`);
}

function invalid(detail: string): never {
  throw new OpError(detail);
}

// ---------------------------------------------------------------------------
// Data types

/** One part of a (concatenated) set key or map value. */
interface Part {
  /** Canonical text, as nft lists it. */
  text: string;
  /** Closed numeric range covered, for interval overlap checks. */
  lo: bigint;
  hi: bigint;
  /** References a chain (verdict `jump X` / `goto X`). */
  chain?: string;
}

/** A datatype the fake understands. */
interface DataType {
  name: string;
  /** Parses one value; `interval` allows prefixes and ranges. */
  parse(s: string, interval: boolean): Part;
}

const PROTOS: Record<string, number> = {
  icmp: 1,
  igmp: 2,
  tcp: 6,
  udp: 17,
  gre: 47,
  esp: 50,
  ah: 51,
  icmpv6: 58,
  "ipv6-icmp": 58,
  sctp: 132,
  udplite: 136,
};
const PROTO_NAMES: Record<number, string> = {
  1: "icmp",
  2: "igmp",
  6: "tcp",
  17: "udp",
  47: "gre",
  50: "esp",
  51: "ah",
  58: "ipv6-icmp",
  132: "sctp",
  136: "udplite",
};

function parseIPv4(s: string): bigint | undefined {
  const v = parseIPv4Number(s);
  return v < 0 ? undefined : BigInt(v);
}

function formatIPv4(v: bigint): string {
  return formatIPv4Number(Number(v));
}

function parseIPv6(s: string): bigint | undefined {
  const b = new Uint8Array(16);
  return parseIPv6Bytes(s, b) ? ipToBigInt(b) : undefined;
}

/** RFC 5952 text with glibc's IPv4 tails, as nft prints it (inet_ntop). */
function formatIPv6(v: bigint): string {
  return formatIPv6Bytes(bigIntToBytes(v, 16), 0, "inet_ntop");
}

function addrType(name: string, bits: number, parse: typeof parseIPv4, fmt: typeof formatIPv4) {
  const all = (1n << BigInt(bits)) - 1n;
  const one = (s: string): bigint => {
    const v = parse(s);
    if (v === undefined) invalid(`"${s}" is not a valid ${name}`);
    return v;
  };
  const asText = (lo: bigint, hi: bigint): string => {
    if (lo === hi) return fmt(lo);
    for (let len = 0; len <= bits; len++) {
      const host = (1n << BigInt(bits - len)) - 1n;
      if ((lo & host) === 0n && hi === (lo | host)) return `${fmt(lo)}/${len}`;
    }
    return `${fmt(lo)}-${fmt(hi)}`;
  };
  return {
    name,
    parse(s: string, interval: boolean): Part {
      const slash = s.indexOf("/");
      const dash = s.indexOf("-");
      if (slash < 0 && dash < 0) {
        const v = one(s);
        return { text: fmt(v), lo: v, hi: v };
      }
      if (!interval) {
        invalid(
          `"${s}" is a prefix or range: add 'flags interval' to the set declaration to use one`,
        );
      }
      let lo: bigint, hi: bigint;
      if (slash >= 0) {
        const len = Number(s.slice(slash + 1));
        if (!/^\d+$/.test(s.slice(slash + 1)) || len > bits) {
          invalid(`"${s}": prefix length must be 0-${bits}`);
        }
        const host = (1n << BigInt(bits - len)) - 1n;
        lo = one(s.slice(0, slash)) & (all ^ host);
        hi = lo | host;
      } else {
        lo = one(s.slice(0, dash));
        hi = one(s.slice(dash + 1));
        if (lo > hi) invalid(`range "${s}" is reversed`);
      }
      return { text: asText(lo, hi), lo, hi };
    },
  };
}

function numberType(name: string, max: bigint, fmt: (v: bigint) => string): DataType {
  const one = (s: string): bigint => {
    if (!/^(0x[0-9a-fA-F]+|\d+)$/.test(s)) {
      invalid(`"${s}" is not a valid ${name} (the fake takes numbers only)`);
    }
    const v = BigInt(s);
    if (v > max) invalid(`${name} "${s}" is out of range (0-${max})`);
    return v;
  };
  return {
    name,
    parse(s, interval) {
      const dash = s.indexOf("-");
      if (dash < 0) {
        const v = one(s);
        return { text: fmt(v), lo: v, hi: v };
      }
      if (!interval) {
        invalid(`"${s}" is a range: add 'flags interval' to the set declaration to use one`);
      }
      const lo = one(s.slice(0, dash));
      const hi = one(s.slice(dash + 1));
      if (lo > hi) invalid(`range "${s}" is reversed`);
      return { text: lo === hi ? fmt(lo) : `${fmt(lo)}-${fmt(hi)}`, lo, hi };
    },
  };
}

const VERDICTS = new globalThis.Set(["accept", "drop", "return", "continue"]);

const DATATYPES: Record<string, DataType> = {
  ipv4_addr: addrType("ipv4_addr", 32, parseIPv4, formatIPv4),
  ipv6_addr: addrType("ipv6_addr", 128, parseIPv6, formatIPv6),
  inet_service: numberType("inet_service", 65535n, String),
  mark: numberType("mark", 0xffffffffn, (v) => `0x${v.toString(16).padStart(8, "0")}`),
  // What `typeof numgen ...` keys hold: a 32-bit number listed in decimal.
  integer: numberType("integer", 0xffffffffn, String),
  inet_proto: {
    name: "inet_proto",
    parse(s) {
      let v: number;
      if (/^\d+$/.test(s)) v = Number(s);
      else if (s in PROTOS) v = PROTOS[s];
      else invalid(`"${s}" is not a valid inet_proto (use tcp, udp, sctp, ... or 0-255)`);
      if (v > 255) invalid(`inet_proto "${s}" is out of range (0-255)`);
      return { text: PROTO_NAMES[v] ?? String(v), lo: BigInt(v), hi: BigInt(v) };
    },
  },
  ifname: {
    name: "ifname",
    parse(s) {
      const name = unquote(s);
      if (name.length === 0 || name.length > 15) invalid(`"${s}" is not a valid ifname`);
      return { text: `"${name}"`, lo: 0n, hi: 0n };
    },
  },
  ether_addr: {
    name: "ether_addr",
    parse(s) {
      if (!/^([0-9a-fA-F]{1,2}:){5}[0-9a-fA-F]{1,2}$/.test(s)) {
        invalid(`"${s}" is not a valid ether_addr`);
      }
      const text = s.split(":").map((x) => x.toLowerCase().padStart(2, "0")).join(":");
      const v = BigInt(`0x${text.replaceAll(":", "")}`);
      return { text, lo: v, hi: v };
    },
  },
  verdict: {
    name: "verdict",
    parse(s) {
      if (VERDICTS.has(s)) return { text: s, lo: 0n, hi: 0n };
      const m = /^(jump|goto)\s+(.+)$/.exec(s);
      if (m === null) {
        invalid(`"${s}" is not a verdict (accept, drop, return, continue, jump X, goto X)`);
      }
      const chain = unquote(m[2].trim());
      return { text: `${m[1]} ${chain}`, lo: 0n, hi: 0n, chain };
    },
  },
};

function unquote(s: string): string {
  return s.length >= 2 && s.startsWith('"') && s.endsWith('"')
    ? s.slice(1, -1).replaceAll('\\"', '"').replaceAll("\\\\", "\\")
    : s;
}

/**
 * The datatype of each expression nft accepts after `typeof` that the fake
 * knows. `numgen random mod N` has no fixed modulus in its type: any lookup
 * with a numgen key may use the set.
 */
function typeofDatatype(expr: string, what: string): string {
  const e = expr.trim().replace(/\s+/g, " ");
  if (/^ip (saddr|daddr)$/.test(e)) return "ipv4_addr";
  if (/^ip6 (saddr|daddr)$/.test(e)) return "ipv6_addr";
  if (e === "meta l4proto") return "inet_proto";
  if (/^(th|tcp|udp|sctp) (sport|dport)$/.test(e)) return "inet_service";
  if (/^numgen (random|inc) mod \d+( offset \d+)?$/.test(e)) return "integer";
  if (e === "meta mark" || e === "ct mark") return "mark";
  if (e === "iifname" || e === "oifname" || e === "meta iifname") return "ifname";
  return invalid(`${what}: the fake does not know the type of expression "${expr.trim()}"`);
}

/** Parses a type like `ipv4_addr . inet_proto . inet_service` into its parts. */
function parseTypeList(type: string, what: string, allowVerdict: boolean): DataType[] {
  const names = type.startsWith("typeof ")
    ? type.slice(7).split(" . ").map((e) => typeofDatatype(e, what))
    : type.split(".").map((p) => p.trim());
  return names.map((n) => {
    const dt = DATATYPES[n];
    if (dt === undefined) {
      invalid(
        `${what} "${type}": unknown datatype "${n}" (the fake knows ${
          Object.keys(DATATYPES).join(", ")
        })`,
      );
    }
    if (dt.name === "verdict" && (!allowVerdict || names.length > 1)) {
      invalid(`${what} "${type}": verdict can only be a map's whole data type`);
    }
    return dt;
  });
}

// ---------------------------------------------------------------------------
// Rule text

/** Splits nft rule text into tokens (quoted strings kept whole). */
function tokenize(rule: string): string[] {
  const out: string[] = [];
  const re = /\s*("(?:[^"\\]|\\.)*"|[{}(),:;]|[^\s{}(),:;"]+)/gy;
  let m: RegExpExecArray | null;
  let last = 0;
  while ((m = re.exec(rule)) !== null) {
    out.push(m[1]);
    last = re.lastIndex;
  }
  if (rule.slice(last).trim() !== "") invalid(`rule "${rule}": unterminated string`);
  return out;
}

/** What a rule body refers to, and how many anonymous sets it makes. */
interface RuleRefs {
  chains: string[];
  sets: string[];
  anonSets: number;
  body: string;
  comment?: string;
}

function analyseRule(text: string, comment: string | undefined): RuleRefs {
  const toks = tokenize(text);
  if (toks.length === 0) invalid("empty rule");
  let body = text.trim();
  // A trailing `comment "..."` in the body is the rule's comment, as the kernel stores it.
  const n = toks.length;
  if (n >= 2 && toks[n - 2] === "comment" && toks[n - 1].startsWith('"')) {
    if (comment !== undefined) invalid(`rule "${text}" has two comments`);
    comment = unquote(toks[n - 1]);
    body = body.slice(0, body.lastIndexOf("comment")).trimEnd();
    toks.length = n - 2;
    if (toks.length === 0) invalid(`rule "${text}" has only a comment`);
  }
  const chains: string[] = [];
  const sets: string[] = [];
  let anonSets = 0;
  // Stack of open braces: whether each is an anonymous set (vs a dynset key) and its shape.
  const stack: { anon: boolean; colon: boolean; comma: boolean }[] = [];
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t === "jump" || t === "goto") {
      const target = toks[i + 1];
      if (target === undefined || /^[{}(),:;]$/.test(target)) {
        invalid(`rule "${text}": ${t} needs a chain name`);
      }
      chains.push(unquote(target));
      i++;
    } else if (t.startsWith("@")) {
      if (t.length === 1) invalid(`rule "${text}": "@" needs a set name`);
      checkName("set", t.slice(1));
      sets.push(t.slice(1));
    } else if (t === "{") {
      // `update @s { ip saddr }` holds a key expression, not a set.
      const prev = toks[i - 1] ?? "";
      stack.push({ anon: !prev.startsWith("@"), colon: false, comma: false });
    } else if (t === "}") {
      const top = stack.pop();
      if (top === undefined) invalid(`rule "${text}": unbalanced "}"`);
      // nft turns a one-element anonymous set into a plain comparison.
      if (top.anon && (top.colon || top.comma)) anonSets++;
    } else if (t === ":" && stack.length > 0) stack[stack.length - 1].colon = true;
    else if (t === "," && stack.length > 0) stack[stack.length - 1].comma = true;
  }
  if (stack.length > 0) invalid(`rule "${text}": unbalanced "{"`);
  return { chains, sets, anonSets, body, comment };
}

// ---------------------------------------------------------------------------
// Internal state

interface RuleEntry {
  body: string;
  comment?: string;
  handle: number;
  refs: RuleRefs;
}

interface ChainEntry {
  chain: Chain;
  handle: number;
  rules: RuleEntry[];
}

interface ElementEntry {
  key: Part[];
  value?: Part[];
  comment?: string;
}

interface SetEntry {
  def: NftSet | NftMap;
  handle: number;
  keyTypes: DataType[];
  valueTypes?: DataType[];
  interval: boolean;
  /** By canonical key text. */
  elements: globalThis.Map<string, ElementEntry>;
}

interface TableData {
  comment?: string;
  nextHandle: number;
  chains: globalThis.Map<string, ChainEntry>;
  sets: globalThis.Map<string, SetEntry>;
  /** Jumps/gotos and map elements pointing at each chain (the kernel's use count, minus rules). */
  chainRefs: globalThis.Map<string, number>;
  /** Rules referring to each set or map. */
  setRefs: globalThis.Map<string, number>;
}

function bump(m: globalThis.Map<string, number>, k: string, d: number): void {
  const v = (m.get(k) ?? 0) + d;
  if (v === 0) m.delete(k);
  else m.set(k, v);
}

/**
 * A copy-on-write view of a table for one transaction: containers are copied
 * shallowly, and a chain or set is cloned the first time the transaction
 * changes it, so the committed table is never touched before the swap.
 */
class Draft {
  readonly t: TableData;
  private ownedChains = new globalThis.Set<string>();
  private ownedSets = new globalThis.Set<string>();

  constructor(base: TableData) {
    this.t = {
      comment: base.comment,
      nextHandle: base.nextHandle,
      chains: new globalThis.Map(base.chains),
      sets: new globalThis.Map(base.sets),
      chainRefs: new globalThis.Map(base.chainRefs),
      setRefs: new globalThis.Map(base.setRefs),
    };
  }

  chain(name: string): ChainEntry {
    const c = this.t.chains.get(name);
    if (c === undefined) fail(ENOENT, `chain ${name} does not exist`);
    if (!this.ownedChains.has(name)) {
      const copy = { ...c, rules: c.rules.slice() };
      this.t.chains.set(name, copy);
      this.ownedChains.add(name);
      return copy;
    }
    return c;
  }

  newChain(e: ChainEntry): void {
    this.t.chains.set(e.chain.name, e);
    this.ownedChains.add(e.chain.name);
  }

  set(name: string): SetEntry {
    const s = this.t.sets.get(name);
    if (s === undefined) fail(ENOENT, `set or map ${name} does not exist`);
    if (!this.ownedSets.has(name)) {
      const copy = { ...s, elements: new globalThis.Map(s.elements) };
      this.t.sets.set(name, copy);
      this.ownedSets.add(name);
      return copy;
    }
    return s;
  }

  newSet(e: SetEntry): void {
    this.t.sets.set(e.def.name, e);
    this.ownedSets.add(e.def.name);
  }
}

function emptyTable(comment?: string): TableData {
  return {
    comment,
    nextHandle: 1,
    chains: new globalThis.Map(),
    sets: new globalThis.Map(),
    chainRefs: new globalThis.Map(),
    setRefs: new globalThis.Map(),
  };
}

function isBase(c: Chain): boolean {
  return c.type !== undefined && c.hook !== undefined;
}

/**
 * Words nft 1.0.6 parses as keywords, so they fail as unquoted chain, set or
 * map names (script.ts does not quote names). Measured with `nft -c`.
 */
const KEYWORDS = new globalThis.Set(
  ("dnat snat missing counter accept drop jump goto return continue masquerade redirect " +
    "reject log limit ip ip6 tcp udp sctp meta ct mark table chain set map element rule vmap " +
    "type hook priority policy flags timeout comment elements handle position add delete " +
    "flush insert replace create list numgen random th fib update dynamic interval constant " +
    "queue notrack dup fwd size tproxy synproxy exists xt devices device netdev arp bridge " +
    "inet ether vlan icmp icmpv6 esp ah comp dccp udplite igmp rt frag hbh mh dst srh " +
    "exthdr osf socket secmark quota").split(" "),
);

function checkName(what: string, name: string): void {
  if (name.length === 0 || name.length > 255) {
    invalid(`${what} name "${name}" must be 1-255 characters`);
  }
  if (/[\s"]/.test(name)) invalid(`${what} name "${name}" must not contain spaces or quotes`);
  if (KEYWORDS.has(name)) {
    invalid(`syntax error: ${what} name "${name}" is an nft keyword; choose another name`);
  }
}

/**
 * A set or map definition as the kernel lists it back (nft 1.0.6, measured):
 * a default timeout implies the `timeout` flag, flags print in the order
 * constant, interval, dynamic, timeout, and a lone `timeout` flag is not
 * listed when the set has a default timeout.
 */
function listedDef<T extends NftSet | NftMap>(def: T): T {
  const out = { ...def };
  const f = new globalThis.Set<SetFlag>(def.flags ?? []);
  if (def.timeout !== undefined) f.add("timeout");
  const ordered = (["constant", "interval", "dynamic", "timeout"] as const).filter((x) => f.has(x));
  const hidden = ordered.length === 0 || (ordered.length === 1 && def.timeout !== undefined);
  if (hidden) delete out.flags;
  else out.flags = ordered;
  return out;
}

/** Compares flags as the kernel sees them: a default timeout implies `timeout`. */
function sameFlags(a: NftSet | NftMap, b: NftSet | NftMap): boolean {
  const eff = (x: NftSet | NftMap) => {
    const f = new globalThis.Set<SetFlag>(x.flags ?? []);
    if (x.timeout !== undefined) f.add("timeout");
    return [...f].sort().join(",");
  };
  return eff(a) === eff(b);
}

function normType(t: string): string {
  if (t.startsWith("typeof ")) return t.replace(/\s+/g, " ");
  return t.split(".").map((p) => p.trim()).join(" . ");
}

// ---------------------------------------------------------------------------
// The fake

/** An in-memory nftables table with kernel-like validation. See the module doc. */
export class FakeNftables implements NftablesClient {
  private data: TableData | null = null;
  /** The last transaction passed to run() (successful or not). */
  lastTransaction: Transaction | null = null;
  /** Op counts of every successful run(), in order (empty transactions count as 0). */
  readonly opCounts: number[] = [];
  /** Number of run() calls that failed. */
  failedRuns = 0;
  private closed = false;

  /**
   * @param family the table's family.
   * @param table the table's name.
   */
  constructor(readonly family: Family, readonly table: string) {}

  /** Op count of the last successful run(), or 0 before any. */
  get lastOpCount(): number {
    return this.opCounts.length === 0 ? 0 : this.opCounts[this.opCounts.length - 1];
  }

  /** Applies all ops atomically: on any error nothing changes. Throws {@link NftablesError}. */
  run(tx: Transaction): Promise<void> {
    this.lastTransaction = tx;
    try {
      this.data = this.apply(tx);
    } catch (e) {
      this.failedRuns++;
      return Promise.reject(e);
    }
    this.opCounts.push(tx.size);
    return Promise.resolve();
  }

  /** Validates the transaction against the current state without applying it. */
  check(tx: Transaction): Promise<void> {
    try {
      this.apply(tx);
    } catch (e) {
      return Promise.reject(e);
    }
    return Promise.resolve();
  }

  /** The table's contents, or null when the table does not exist. */
  list(): Promise<TableState | null> {
    return Promise.resolve(this.state());
  }

  /** Chain names (sorted), or [] when the table does not exist. */
  listChains(): Promise<string[]> {
    this.ensureOpen();
    return Promise.resolve(this.data === null ? [] : [...this.data.chains.keys()].sort());
  }

  /** Elements of one set or map. Rejects with ENOENT when it (or the table) does not exist. */
  listElements(kind: "set" | "map", name: string): Promise<Element[]> {
    this.ensureOpen();
    const s = this.data?.sets.get(name);
    if (s === undefined || s.def.kind !== kind) {
      return Promise.reject(
        new NftablesError(`${ENOENT}: ${kind} ${name} does not exist in ${this.where()}`),
      );
    }
    return Promise.resolve([...s.elements.values()].map((e) => toElement(s, e)));
  }

  /** Rules per chain (chains without rules absent), empty when the table does not exist. */
  ruleCounts(): Promise<ReadonlyMap<string, number>> {
    this.ensureOpen();
    const out = new Map<string, number>();
    for (const [name, c] of this.data?.chains ?? []) {
      if (c.rules.length > 0) out.set(name, c.rules.length);
    }
    return Promise.resolve(out);
  }

  /** One chain with its rules, or null when it (or the table) does not exist. */
  listChain(name: string): Promise<{ chain: Chain; rules: Rule[] } | null> {
    return Promise.resolve(this.state()?.chains.get(name) ?? null);
  }

  /** The element with this key, or null. */
  getElement(kind: "set" | "map", name: string, key: string[]): Promise<Element | null> {
    this.ensureOpen();
    const s = this.data?.sets.get(name);
    if (s === undefined || s.def.kind !== kind) return Promise.resolve(null);
    let k: string;
    try {
      k = parseParts(key, s.keyTypes, s.interval, "key", name).map((p) => p.text).join(" . ");
    } catch {
      return Promise.resolve(null);
    }
    const e = s.elements.get(k);
    return Promise.resolve(e === undefined ? null : toElement(s, e));
  }

  /** Set and map declarations as the kernel lists them, or [] when the table does not exist. */
  listSets(): Promise<(NftSet | NftMap)[]> {
    this.ensureOpen();
    return Promise.resolve([...this.data?.sets.values() ?? []].map((s) => listedDef(s.def)));
  }

  /** Marks the client closed; later calls throw. */
  close(): void {
    this.closed = true;
  }

  /**
   * The table as a {@link TableState} (fresh objects, safe to keep), or null
   * when it does not exist. Rules carry their handles; a comment written
   * inside a rule body is moved to `comment`, as the kernel does.
   */
  state(): TableState | null {
    this.ensureOpen();
    const t = this.data;
    if (t === null) return null;
    const st: TableState = {
      family: this.family,
      name: this.table,
      chains: new globalThis.Map(),
      sets: new globalThis.Map(),
      maps: new globalThis.Map(),
    };
    if (t.comment !== undefined) st.comment = t.comment;
    for (const [name, c] of t.chains) {
      st.chains.set(name, {
        chain: { ...c.chain },
        rules: c.rules.map((r) => toRule(name, r)),
      });
    }
    for (const [name, s] of t.sets) {
      const elements = [...s.elements.values()].map((e) => toElement(s, e));
      const def = listedDef(s.def);
      if (def.kind === "set") st.sets.set(name, { set: def, elements });
      else st.maps.set(name, { map: def, elements });
    }
    return st;
  }

  /**
   * A stable text dump in `nft list table` layout for golden tests: sets,
   * maps and chains sorted by name, elements sorted by key, rules in order,
   * no handles. Empty string when the table does not exist.
   */
  dump(): string {
    this.ensureOpen();
    const t = this.data;
    if (t === null) return "";
    const q = (s: string) => `"${s.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
    const out = [`table ${this.family} ${this.table} {`];
    if (t.comment !== undefined) out.push(`\tcomment ${q(t.comment)}`);
    const byName = <T>(m: globalThis.Map<string, T>) =>
      [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    for (const kind of ["set", "map"] as const) {
      for (const [name, s] of byName(t.sets)) {
        if (s.def.kind !== kind) continue;
        const d = s.def;
        out.push(`\t${kind} ${name} {`);
        const typeLine = d.type.startsWith("typeof ")
          ? normType(d.type)
          : `type ${normType(d.type)}`;
        out.push(`\t\t${typeLine}${d.kind === "map" ? ` : ${normType(d.dataType)}` : ""}`);
        const flags = listedDef(d).flags;
        if (flags !== undefined) out.push(`\t\tflags ${flags.join(",")}`);
        if (d.timeout !== undefined) out.push(`\t\ttimeout ${formatNftDuration(d.timeout)}`);
        if (d.comment !== undefined) out.push(`\t\tcomment ${q(d.comment)}`);
        const elems = [...s.elements.entries()].sort(([a], [b]) => compareKeys(a, b));
        if (elems.length > 0) {
          out.push(`\t\telements = {`);
          elems.forEach(([k, e], i) => {
            const c = e.comment === undefined ? "" : ` comment ${q(e.comment)}`;
            const v = e.value === undefined ? "" : ` : ${e.value.map((p) => p.text).join(" . ")}`;
            out.push(`\t\t\t${k}${c}${v}${i < elems.length - 1 ? "," : ""}`);
          });
          out.push(`\t\t}`);
        }
        out.push(`\t}`);
      }
    }
    for (const [name, c] of byName(t.chains)) {
      out.push(`\tchain ${name} {`);
      const ch = c.chain;
      if (isBase(ch)) {
        out.push(
          `\t\ttype ${ch.type} hook ${ch.hook} priority ${ch.priority ?? 0}; policy ${
            ch.policy ?? "accept"
          };`,
        );
      }
      if (ch.comment !== undefined) out.push(`\t\tcomment ${q(ch.comment)}`);
      for (const r of c.rules) {
        out.push(`\t\t${r.body}${r.comment === undefined ? "" : ` comment ${q(r.comment)}`}`);
      }
      out.push(`\t}`);
    }
    out.push("}");
    return out.join("\n") + "\n";
  }

  private where(): string {
    return `table ${this.family} ${this.table}`;
  }

  private ensureOpen(): void {
    if (this.closed) throw new Error("FakeNftables: used after close()");
  }

  /** Validates and applies `tx` to a draft; returns the new table (or null). */
  private apply(tx: Transaction): TableData | null {
    this.ensureOpen();
    let draft: Draft | null = this.data === null ? null : new Draft(this.data);
    let graphChanged = false;
    for (const [i, op] of tx.ops.entries()) {
      try {
        draft = this.step(draft, op);
      } catch (e) {
        throw this.wrap(e, op, i);
      }
      graphChanged ||= addsEdges(op);
    }
    if (draft !== null && graphChanged && jumpDepthError(draft.t) !== undefined) {
      throw this.findDepthError(tx);
    }
    return draft === null ? null : draft.t;
  }

  /**
   * The kernel checks jump depth as each rule or element arrives; the fake
   * checks once per transaction and, only on failure, replays the ops to find
   * the first one that broke the limit.
   */
  private findDepthError(tx: Transaction): NftablesError {
    let draft: Draft | null = this.data === null ? null : new Draft(this.data);
    for (const [i, op] of tx.ops.entries()) {
      draft = this.step(draft, op);
      if (draft === null || !addsEdges(op)) continue;
      const err = jumpDepthError(draft.t);
      if (err !== undefined) return this.wrap(new OpError(err), op, i);
    }
    return new NftablesError(`${EMLINK}: jump depth exceeded`);
  }

  /** Applies one op to the draft (null: no table); returns the new draft. */
  private step(draft: Draft | null, op: Operation): Draft | null {
    if (op.obj.kind === "table") {
      switch (op.verb) {
        case "add":
        case "create":
          if (draft === null) return new Draft(emptyTable(op.obj.comment));
          if (op.verb === "create") fail(EEXIST, `${this.where()} exists`);
          return draft;
        case "delete":
          if (draft === null) fail(ENOENT, `${this.where()} does not exist`);
          return null;
        case "flush":
          if (draft === null) fail(ENOENT, `${this.where()} does not exist`);
          this.flushTable(draft);
          return draft;
        default:
          invalid(`cannot ${op.verb} a table`);
      }
    }
    if (draft === null) fail(ENOENT, `${this.where()} does not exist`);
    this.applyOp(draft, op);
    return draft;
  }

  private wrap(e: unknown, op: Operation, i: number): NftablesError {
    let cmd: string | undefined;
    try {
      cmd = renderOperation(this.family, this.table, op);
    } catch {
      cmd = `${op.verb} ${op.obj.kind}`;
    }
    const msg = e instanceof Error ? e.message : String(e);
    return new NftablesError(msg, i, cmd);
  }

  private applyOp(d: Draft, op: Operation): void {
    const { verb, obj } = op;
    switch (obj.kind) {
      case "chain":
        return this.chainOp(d, verb, obj);
      case "rule":
        return this.ruleOp(d, verb, obj);
      case "set":
      case "map":
        return this.setOp(d, verb, obj);
      case "element":
        return this.elementOp(d, verb, obj);
    }
    invalid(`unknown object kind ${(obj as { kind: string }).kind}`);
  }

  private flushTable(d: Draft): void {
    for (const name of [...d.t.chains.keys()]) {
      const c = d.chain(name);
      for (const r of c.rules) releaseRule(d, r);
      c.rules = [];
    }
  }

  private chainOp(d: Draft, verb: Operation["verb"], c: Chain): void {
    checkName("chain", c.name);
    const old = d.t.chains.get(c.name);
    switch (verb) {
      case "add":
      case "create": {
        if ((c.type === undefined) !== (c.hook === undefined)) {
          invalid(`chain ${c.name}: a base chain needs both type and hook`);
        }
        if (old === undefined) {
          d.newChain({ chain: { ...c }, handle: d.t.nextHandle++, rules: [] });
          return;
        }
        if (verb === "create") fail(EEXIST, `chain ${c.name} exists`);
        if (!isBase(c)) return;
        const o = old.chain;
        if (!isBase(o)) fail(EEXIST, `chain ${c.name} exists as a regular chain`);
        if (o.type !== c.type) fail(EEXIST, `chain ${c.name} exists with type ${o.type}`);
        if (o.hook !== c.hook || (o.priority ?? 0) !== (c.priority ?? 0)) {
          fail(
            EOPNOTSUPP,
            `chain ${c.name} exists with hook ${o.hook} priority ${o.priority ?? 0}`,
          );
        }
        if (c.policy !== undefined && c.policy !== o.policy) {
          d.chain(c.name).chain = { ...o, policy: c.policy };
        }
        return;
      }
      case "flush": {
        const e = d.chain(c.name);
        for (const r of e.rules) releaseRule(d, r);
        e.rules = [];
        return;
      }
      case "delete": {
        // Counted before its own rules go: a chain that jumps to itself stays busy.
        const refs = d.t.chainRefs.get(c.name) ?? 0;
        if (refs > 0) {
          fail(
            EBUSY,
            `chain ${c.name} is still the target of ${refs} jump/goto(s) or map elements`,
          );
        }
        for (const r of d.chain(c.name).rules) releaseRule(d, r);
        d.t.chains.delete(c.name);
        return;
      }
      default:
        invalid(`cannot ${verb} a chain`);
    }
  }

  private ruleOp(d: Draft, verb: Operation["verb"], r: Rule): void {
    const c = d.chain(r.chain);
    const indexOf = (h: number | undefined, what: string): number => {
      if (h === undefined) invalid(`${what} needs a rule handle`);
      const i = c.rules.findIndex((x) => x.handle === h);
      if (i < 0) fail(ENOENT, `rule handle ${h} does not exist in chain ${r.chain}`);
      return i;
    };
    switch (verb) {
      case "add":
      case "create":
      case "insert": {
        const refs = analyseRule(r.rule, r.comment);
        const at = r.position === undefined
          ? (verb === "insert" ? 0 : c.rules.length)
          : indexOf(r.position, "position") + (verb === "insert" ? 0 : 1);
        holdRule(d, refs);
        d.t.nextHandle += refs.anonSets;
        const entry = { body: refs.body, comment: refs.comment, handle: d.t.nextHandle++, refs };
        c.rules.splice(at, 0, entry);
        return;
      }
      case "replace": {
        const i = indexOf(r.handle, "replace");
        const refs = analyseRule(r.rule, r.comment);
        releaseRule(d, c.rules[i]);
        holdRule(d, refs);
        d.t.nextHandle += refs.anonSets;
        c.rules[i] = { body: refs.body, comment: refs.comment, handle: c.rules[i].handle, refs };
        return;
      }
      case "delete": {
        const i = indexOf(r.handle, "delete");
        releaseRule(d, c.rules[i]);
        c.rules.splice(i, 1);
        return;
      }
      default:
        invalid(`cannot ${verb} a rule`);
    }
  }

  private setOp(d: Draft, verb: Operation["verb"], s: NftSet | NftMap): void {
    checkName(s.kind, s.name);
    const old = d.t.sets.get(s.name);
    switch (verb) {
      case "add":
      case "create": {
        const keyTypes = parseTypeList(s.type, `${s.kind} ${s.name} type`, false);
        const dataType =
          s.kind === "map" && s.type.startsWith("typeof ") && s.dataType !== "verdict"
            ? `typeof ${s.dataType}`
            : s.kind === "map"
            ? s.dataType
            : "";
        const valueTypes = s.kind === "map"
          ? parseTypeList(dataType, `map ${s.name} data type`, true)
          : undefined;
        for (const f of s.flags ?? []) {
          if (!["constant", "interval", "timeout", "dynamic"].includes(f)) {
            invalid(`${s.kind} ${s.name}: unknown flag "${f}"`);
          }
        }
        if (old === undefined) {
          d.newSet({
            def: { ...s },
            handle: d.t.nextHandle++,
            keyTypes,
            valueTypes,
            interval: (s.flags ?? []).includes("interval"),
            elements: new globalThis.Map(),
          });
          return;
        }
        if (verb === "create") fail(EEXIST, `${old.def.kind} ${s.name} exists`);
        const o = old.def;
        const same = o.kind === s.kind && normType(o.type) === normType(s.type) &&
          (o.kind !== "map" || s.kind !== "map" || normType(o.dataType) === normType(s.dataType)) &&
          sameFlags(o, s);
        if (!same) {
          fail(EEXIST, `${o.kind} ${s.name} exists with a different type or flags`);
        }
        // The kernel (6.x) takes the new default timeout, or none, from a re-add.
        if (o.timeout !== s.timeout) {
          const def = { ...o };
          if (s.timeout === undefined) delete def.timeout;
          else def.timeout = s.timeout;
          d.set(s.name).def = def;
        }
        return;
      }
      case "flush": {
        if (old === undefined || old.def.kind !== s.kind) {
          fail(ENOENT, `${s.kind} ${s.name} does not exist`);
        }
        const e = d.set(s.name);
        for (const el of e.elements.values()) releaseElement(d, el);
        e.elements = new globalThis.Map();
        return;
      }
      case "delete": {
        // The kernel deletes by name whatever the kind.
        if (old === undefined) fail(ENOENT, `${s.kind} ${s.name} does not exist`);
        const refs = d.t.setRefs.get(s.name) ?? 0;
        if (refs > 0) fail(EBUSY, `${old.def.kind} ${s.name} is still used by ${refs} rule(s)`);
        for (const el of old.elements.values()) releaseElement(d, el);
        d.t.sets.delete(s.name);
        return;
      }
      default:
        invalid(`cannot ${verb} a ${s.kind}`);
    }
  }

  private elementOp(d: Draft, verb: Operation["verb"], e: Element): void {
    const name = e.set ?? e.map;
    if (name === undefined) invalid("element needs a set or map name");
    if (d.t.sets.get(name) === undefined) fail(ENOENT, `set or map ${name} does not exist`);
    const s = d.set(name);
    const key = parseParts(e.key, s.keyTypes, s.interval, "key", name);
    const k = key.map((p) => p.text).join(" . ");
    const existing = s.elements.get(k);
    switch (verb) {
      case "add":
      case "create": {
        let value: Part[] | undefined;
        if (s.valueTypes !== undefined) {
          if (e.value === undefined) invalid(`map ${name}: element ${k} needs a value`);
          value = parseParts(e.value, s.valueTypes, false, "value", name);
        } else if (e.value !== undefined) {
          invalid(`set ${name}: element ${k} cannot have a value (it is not a map)`);
        }
        const v = value?.map((p) => p.text).join(" . ");
        if (existing !== undefined) {
          if (verb === "create") fail(EEXIST, `element ${k} exists in ${name}`);
          const ov = existing.value?.map((p) => p.text).join(" . ");
          if (ov !== v) fail(EEXIST, `element ${k} exists in ${name} with value ${ov}`);
          return;
        }
        if (s.interval) checkOverlap(s, key);
        for (const p of value ?? []) {
          if (p.chain !== undefined) holdChain(d, p.chain);
        }
        s.elements.set(k, { key, value, comment: e.comment });
        return;
      }
      case "delete":
        if (existing === undefined) fail(ENOENT, `element ${k} does not exist in ${name}`);
        releaseElement(d, existing);
        s.elements.delete(k);
        return;
      default:
        invalid(`cannot ${verb} an element`);
    }
  }
}

function parseParts(
  parts: string[],
  types: DataType[],
  interval: boolean,
  what: string,
  set: string,
): Part[] {
  // A part may hold several fields of a concatenation ("1.2.3.4 . tcp . 80").
  const flat = parts.flatMap((p) => p.split(" . ")).map((p) => p.trim());
  if (flat.length !== types.length) {
    invalid(
      `${set}: ${what} "${flat.join(" . ")}" has ${flat.length} part(s), type ${
        types.map((t) => t.name).join(" . ")
      } needs ${types.length}`,
    );
  }
  return flat.map((p, i) => {
    try {
      return types[i].parse(p, interval);
    } catch (e) {
      invalid(`${set}: ${what} "${flat.join(" . ")}": ${(e as Error).message}`);
    }
  });
}

/** nft rejects a new interval that overlaps an existing one (identical ones were handled). */
function checkOverlap(s: SetEntry, key: Part[]): void {
  for (const [k, e] of s.elements) {
    if (e.key.every((p, i) => p.lo <= key[i].hi && key[i].lo <= p.hi)) {
      const where = `${s.def.kind} ${s.def.name}`;
      if (key.length === 1) invalid(`interval overlaps with an existing one (${k} in ${where})`);
      fail(EEXIST, `element overlaps ${k} in ${where}`);
    }
  }
}

function holdChain(d: Draft, name: string): void {
  checkName("chain", name);
  const c = d.t.chains.get(name);
  if (c === undefined) fail(ENOENT, `chain ${name} does not exist (jump/goto target)`);
  if (isBase(c.chain)) fail(EOPNOTSUPP, `cannot jump/goto base chain ${name}`);
  bump(d.t.chainRefs, name, 1);
}

function holdRule(d: Draft, refs: RuleRefs): void {
  for (const s of refs.sets) {
    if (!d.t.sets.has(s)) fail(ENOENT, `set or map @${s} does not exist`);
  }
  for (const c of refs.chains) holdChain(d, c);
  for (const s of refs.sets) bump(d.t.setRefs, s, 1);
}

function releaseRule(d: Draft, r: RuleEntry): void {
  for (const c of r.refs.chains) bump(d.t.chainRefs, c, -1);
  for (const s of r.refs.sets) bump(d.t.setRefs, s, -1);
}

function releaseElement(d: Draft, e: ElementEntry): void {
  for (const p of e.value ?? []) {
    if (p.chain !== undefined) bump(d.t.chainRefs, p.chain, -1);
  }
}

/** Ops that can add a jump/goto edge to the chain graph. */
function addsEdges(op: Operation): boolean {
  const { verb, obj } = op;
  if (obj.kind === "rule") return verb !== "delete";
  return obj.kind === "element" && verb !== "delete";
}

/**
 * Checks what the kernel checks for chains reachable from a base chain: no
 * loops and at most {@link MAX_JUMP_DEPTH} - 1 jumps/gotos deep, following
 * rules' jumps and gotos and the verdicts of maps they look up. Returns the
 * error text, or undefined when the graph is fine.
 */
function jumpDepthError(t: TableData): string | undefined {
  // Longest jump path below each chain whose subtree has been fully walked.
  const below = new globalThis.Map<string, number>();
  const onStack = new globalThis.Set<string>();
  class TooDeep extends Error {}
  // Recursion stops at MAX_JUMP_DEPTH, so the stack stays shallow.
  const walk = (name: string, level: number): number => {
    if (level >= MAX_JUMP_DEPTH || onStack.has(name)) throw new TooDeep(name);
    const known = below.get(name);
    if (known !== undefined) {
      if (level + known >= MAX_JUMP_DEPTH) throw new TooDeep(name);
      return known;
    }
    const c = t.chains.get(name);
    if (c === undefined) return 0;
    onStack.add(name);
    let d = 0;
    for (const r of c.rules) {
      for (const next of r.refs.chains) d = Math.max(d, 1 + walk(next, level + 1));
      for (const setName of r.refs.sets) {
        const s = t.sets.get(setName);
        if (s === undefined || s.valueTypes?.[0]?.name !== "verdict") continue;
        for (const e of s.elements.values()) {
          const next = e.value?.[0]?.chain;
          if (next !== undefined) d = Math.max(d, 1 + walk(next, level + 1));
        }
      }
    }
    onStack.delete(name);
    below.set(name, d);
    return d;
  };
  for (const [name, c] of t.chains) {
    if (!isBase(c.chain)) continue;
    try {
      walk(name, 0);
    } catch (e) {
      if (!(e instanceof TooDeep)) throw e;
      return `${EMLINK}: base chain ${name} reaches chain ${e.message} through a loop or ` +
        `more than ${MAX_JUMP_DEPTH - 1} jumps`;
    }
  }
  return undefined;
}

function toRule(chain: string, r: RuleEntry): Rule {
  const out: Rule = { kind: "rule", chain, rule: r.body, handle: r.handle };
  if (r.comment !== undefined) out.comment = r.comment;
  return out;
}

function toElement(s: SetEntry, e: ElementEntry): Element {
  const out: Element = { kind: "element", key: e.key.map((p) => p.text) };
  if (s.def.kind === "set") out.set = s.def.name;
  else out.map = s.def.name;
  if (e.value !== undefined) out.value = e.value.map((p) => p.text);
  if (e.comment !== undefined) out.comment = e.comment;
  return out;
}

/** Orders element keys by their canonical text (stable, locale-independent). */
function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
