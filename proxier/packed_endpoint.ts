/**
 * The endpoint object the trackers keep: hundreds of thousands of them at scale, alive for as
 * long as their slices. It holds the address (an IPv4 address as a number: no string of its own),
 * one number for the port and the four conditions, and a placement (node, zone, topology hints)
 * shared by every endpoint with the same one: 48 bytes, against 80 for a plain object with a
 * field per condition and 32 more for its address text, and more once a zone is set (a property
 * added after the literal costs each object a property array).
 *
 * @module
 */
import { formatIPv4Number } from "../net/ip.ts";
import type { EndpointInfo } from "./model.ts";

const PORT_MASK = 0xffff;
const READY = 1 << 16;
const SERVING = 1 << 17;
const TERMINATING = 1 << 18;
const LOCAL = 1 << 19;

/** Node, zone and hints of endpoints; one shared object per distinct combination. */
interface Placement {
  readonly nodeName?: string;
  readonly zone?: string;
  readonly zoneHints?: string[];
  readonly nodeHints?: string[];
}

/**
 * Placements kept at most. Past the bound, a new combination gets an object of its own: a
 * hostile stream of node or zone names cannot grow the table without end.
 */
const PLACES_MAX = 10_000;

/** Placements without hints, by node then zone (the common case: no string to build). */
const plain = new Map<string | undefined, Map<string | undefined, Placement>>();
/** Placements with hints, by a JSON key (topology-aware routing; rarer). */
const hinted = new Map<string, Placement>();
let placeCount = 0;

function placement(
  nodeName: string | undefined,
  zone: string | undefined,
  zoneHints: string[] | undefined,
  nodeHints: string[] | undefined,
): Placement | undefined {
  if (zoneHints === undefined && nodeHints === undefined) {
    if (nodeName === undefined && zone === undefined) return undefined;
    let byZone = plain.get(nodeName);
    const hit = byZone?.get(zone);
    if (hit !== undefined) return hit;
    const p = zone === undefined ? { nodeName } : { nodeName, zone };
    if (placeCount >= PLACES_MAX) return p;
    if (byZone === undefined) plain.set(nodeName, byZone = new Map());
    byZone.set(zone, p);
    placeCount++;
    return p;
  }
  const key = JSON.stringify([nodeName, zone, zoneHints, nodeHints]);
  const hit = hinted.get(key);
  if (hit !== undefined) return hit;
  const p: Placement = { nodeName, zone, zoneHints, nodeHints };
  if (placeCount < PLACES_MAX) {
    hinted.set(key, p);
    placeCount++;
  }
  return p;
}

/** An {@link EndpointInfo} in 48 bytes; read-only once built. */
export class PackedEndpoint implements EndpointInfo {
  /** An IPv4 address as a signed 32-bit number (a small integer to V8), else the text. */
  readonly #addr: number | string;
  readonly #word: number;
  readonly #place: Placement | undefined;

  private constructor(addr: number | string, word: number, place: Placement | undefined) {
    this.#addr = addr;
    this.#word = word;
    this.#place = place;
  }

  /**
   * The endpoint of `p` (the port must be 0-65535: slice_parse.ts checks it). Its `ip` may be
   * an IPv4 address as a number (`parseIPv4Number`): kept as it is, with no text.
   */
  static of(p: Omit<EndpointInfo, "ip"> & { ip: string | number }): PackedEndpoint {
    const word = (p.port & PORT_MASK) | (p.ready ? READY : 0) | (p.serving ? SERVING : 0) |
      (p.terminating ? TERMINATING : 0) | (p.isLocal ? LOCAL : 0);
    const place = placement(p.nodeName, p.zone, p.zoneHints, p.nodeHints);
    return new PackedEndpoint(typeof p.ip === "number" ? p.ip | 0 : p.ip, word, place);
  }

  /** The same endpoint on another port (a slice's later ports). */
  withPort(port: number): PackedEndpoint {
    const word = (this.#word & ~PORT_MASK) | (port & PORT_MASK);
    return new PackedEndpoint(this.#addr, word, this.#place);
  }

  /** The endpoint's address (canonical text). */
  get ip(): string {
    const a = this.#addr;
    return typeof a === "number" ? formatIPv4Number(a >>> 0) : a;
  }

  /** An IPv4 address as its unsigned number (slice_merge.ts sort key), else undefined. */
  get v4(): number | undefined {
    const a = this.#addr;
    return typeof a === "number" ? a >>> 0 : undefined;
  }

  /** The endpoint's port. */
  get port(): number {
    return this.#word & PORT_MASK;
  }
  /** conditions.ready. */
  get ready(): boolean {
    return (this.#word & READY) !== 0;
  }
  /** conditions.serving. */
  get serving(): boolean {
    return (this.#word & SERVING) !== 0;
  }
  /** conditions.terminating. */
  get terminating(): boolean {
    return (this.#word & TERMINATING) !== 0;
  }
  /** The endpoint runs on this node. */
  get isLocal(): boolean {
    return (this.#word & LOCAL) !== 0;
  }
  /** The node it runs on. */
  get nodeName(): string | undefined {
    return this.#place?.nodeName;
  }
  /** The zone it runs in. */
  get zone(): string | undefined {
    return this.#place?.zone;
  }
  /** Topology hints: zones. */
  get zoneHints(): string[] | undefined {
    return this.#place?.zoneHints;
  }
  /** Topology hints: nodes. */
  get nodeHints(): string[] | undefined {
    return this.#place?.nodeHints;
  }

  /** The fields as a plain object (JSON, logs, test comparisons). */
  toJSON(): EndpointInfo {
    const out: EndpointInfo = {
      ip: this.ip,
      port: this.port,
      ready: this.ready,
      serving: this.serving,
      terminating: this.terminating,
      isLocal: this.isLocal,
    };
    const p = this.#place;
    if (p?.nodeName !== undefined) out.nodeName = p.nodeName;
    if (p?.zone !== undefined) out.zone = p.zone;
    if (p?.zoneHints !== undefined) out.zoneHints = p.zoneHints;
    if (p?.nodeHints !== undefined) out.nodeHints = p.nodeHints;
    return out;
  }
}
