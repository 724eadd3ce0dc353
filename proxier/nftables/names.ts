/**
 * Names of the table's fixed objects and of the per-service-port chains and
 * sets. Per-service names follow upstream kube-proxy's scheme: a prefix, the
 * first 8 characters of base32(sha256(base)) and the readable base, e.g.
 * `service-ULMVA6XW-ns1/svc1/tcp/p80`, so that two names that differ in one
 * character still look different and a truncated name stays unique.
 *
 * @module
 */
import type { ServicePortInfo } from "../model.ts";

/** The table name used in both families. */
export const TABLE = "kube-proxy";
/** The table comment. */
export const TABLE_COMMENT = "rules for kube-proxy";

/** The names of the table's fixed chains, sets and maps (those of one service port are built). */
export const FIXED = {
  filterPreroutingPreDnat: "filter-prerouting-pre-dnat",
  filterOutputPreDnat: "filter-output-pre-dnat",
  filterInput: "filter-input",
  filterForward: "filter-forward",
  filterOutput: "filter-output",
  natPrerouting: "nat-prerouting",
  natOutput: "nat-output",
  natPostrouting: "nat-postrouting",
  services: "services",
  serviceEndpointsCheck: "service-endpoints-check",
  nodeportEndpointsCheck: "nodeport-endpoints-check",
  clusterIPsCheck: "cluster-ips-check",
  firewallCheck: "firewall-check",
  rejectChain: "reject-chain",
  masquerading: "masquerading",
  serviceIPs: "service-ips",
  serviceNodePorts: "service-nodeports",
  serviceClasses: "service-classes",
  nodePortDispatch: "nodeport-dispatch",
  noEndpointServices: "no-endpoint-services",
  noEndpointNodePorts: "no-endpoint-nodeports",
  firewallIPs: "firewall-ips",
  clusterIPs: "cluster-ips",
  nodePortIPs: "nodeport-ips",
  hairpin: "hairpin",
} as const;

/**
 * Kinds of shared endpoint-selection chains: `dnat-N` for ClusterIP traffic,
 * `external-dnat-N` for externalIPs and LoadBalancer IPs (marks for
 * masquerade first), `nodeport-dnat-N` for NodePorts (marks, and looks up
 * without the destination address).
 */
export type ClassKind = "dnat" | "external" | "nodeport";

const CLASS_PREFIX: Record<ClassKind, string> = {
  dnat: "dnat",
  external: "external-dnat",
  nodeport: "nodeport-dnat",
};

function genSuffix(gen: number): string {
  return gen === 0 ? "" : `-g${gen}`;
}

/** Transport protocols, as nft names them. */
export type L4 = "tcp" | "udp" | "sctp";

/** The protocols endpoint maps and class chains exist for. */
export const L4S: readonly L4[] = ["tcp", "udp", "sctp"];

/**
 * Name of the shared chain that picks one of `n` endpoints for a `kind` of
 * frontend of protocol `proto`, in generation `gen` of the endpoint maps
 * (see docs/dataplane.md): `dnat-tcp-10`, `external-dnat-udp-3-g1`, ...
 */
export function classChainName(kind: ClassKind, proto: L4, n: number, gen: number): string {
  return `${CLASS_PREFIX[kind]}-${proto}-${n}${genSuffix(gen)}`;
}

/**
 * Name of a map holding endpoint buckets (`endpoints-tcp`, `nodeport-endpoints-udp-g1`, ...);
 * `large`: that of the frontends with more than {@link RESERVED_CLASS_MAX} endpoints
 * (`endpoints-large-tcp`, see {@link usesLargeMap}).
 */
export function endpointsMapName(nodePort: boolean, proto: L4, gen: number, large = false): string {
  return `${nodePort ? "nodeport-endpoints" : "endpoints"}-${large ? "large-" : ""}${proto}${
    genSuffix(gen)
  }`;
}

const ENDPOINTS_MAP = /^(nodeport-)?endpoints-(large-)?(tcp|udp|sctp)(?:-g(\d+))?$/;

/** Parses an endpoint bucket map name back into its parts, or undefined for any other name. */
export function parseEndpointsMap(
  name: string,
): { nodePort: boolean; proto: L4; gen: number; large: boolean } | undefined {
  const m = ENDPOINTS_MAP.exec(name);
  if (m === null) return undefined;
  return {
    nodePort: m[1] !== undefined,
    proto: m[3] as L4,
    gen: m[4] === undefined ? 0 : Number(m[4]),
    large: m[2] !== undefined,
  };
}

const CLASS_CHAIN = /^(dnat|external-dnat|nodeport-dnat)-(tcp|udp|sctp)-(\d+)(?:-g(\d+))?$/;

/** Parses a class chain name back into its parts, or undefined for any other name. */
export function parseClassChain(
  name: string,
): { kind: ClassKind; proto: L4; n: number; gen: number } | undefined {
  const m = CLASS_CHAIN.exec(name);
  if (m === null) return undefined;
  const kind = m[1] === "dnat" ? "dnat" : m[1] === "external-dnat" ? "external" : "nodeport";
  return { kind, proto: m[2] as L4, n: Number(m[3]), gen: m[4] === undefined ? 0 : Number(m[4]) };
}

/**
 * Class chains kept whether used or not: every kind, for TCP and UDP, with 1 to this many
 * endpoints. A rule that looks up a map makes the kernel check every element of the map as it
 * binds (`nf_tables_bind_set`), so creating a class chain once the bucket maps are full costs a
 * walk of all of them (~80 ms at 30k Services × 10). These are created with the maps, while
 * those are empty, so the common first use of a count is a set and a rule, not a walk.
 */
export const RESERVED_CLASS_MAX = 16;

/**
 * Frontends with at least this many endpoints keep their last bucket array and their endpoint
 * strings between syncs (frontend.ts, service_rules.ts): a change to a big Service then costs
 * lookups of strings already hashed, not a split and a hash of every one.
 */
export const BIG_FRONTEND = 128;

/**
 * Whether the buckets of a frontend with `n` endpoints (and its class chain's lookup) are in
 * the large bucket maps. A class chain above the reserved range is created on first use, and
 * its rule binds the map it looks up, which makes the kernel walk that map: kept apart, the
 * walk covers only the Services that big (a few thousand buckets), not every bucket of the
 * cluster (~160-250 ms at 60k Services × 10, measured with the big-Deployment bench).
 */
export function usesLargeMap(n: number): boolean {
  return n > RESERVED_CLASS_MAX;
}

const RESERVED_PROTOS: readonly L4[] = ["tcp", "udp"];

/** The reserved class chains of generation `gen` (see {@link RESERVED_CLASS_MAX}). */
export function reservedClasses(gen: number): string[] {
  const out: string[] = [];
  for (const kind of ["dnat", "external", "nodeport"] as const) {
    for (const proto of RESERVED_PROTOS) {
      for (let n = 1; n <= RESERVED_CLASS_MAX; n++) out.push(classChainName(kind, proto, n, gen));
    }
  }
  return out;
}

/**
 * The reserved classes kept ready beside class chain `name` (of generation `gen`): one endpoint
 * fewer and one more (a Service scaled by one), one endpoint (a Service scaled to one, or a new
 * one starting with one pod) and two (the neighbour of one: a Service that moves to one needs
 * no write of another class's set either), of the same kind and protocol. Their sets and
 * dispatch rules are written while unused (plan/common.ts `readyNeighbours`), so those moves
 * are changes of elements only.
 */
export function classNeighbours(name: string, gen: number): string[] {
  const c = parseClassChain(name);
  if (c === undefined || c.gen !== gen) return [];
  const out: string[] = [];
  for (const n of new Set([1, 2, c.n - 1, c.n + 1])) {
    const next = classChainName(c.kind, c.proto, n, gen);
    if (n >= 1 && n !== c.n && isReservedClass(next, gen)) out.push(next);
  }
  return out;
}

/** True for a reserved class chain of generation `gen`. */
export function isReservedClass(name: string, gen: number): boolean {
  const c = parseClassChain(name);
  return c !== undefined && c.gen === gen && c.n <= RESERVED_CLASS_MAX &&
    RESERVED_PROTOS.includes(c.proto);
}

const CLASS_SET_PREFIX = "frontends-";

/**
 * Name of the set holding the frontends that class chain `chain` serves
 * (`frontends-dnat-tcp-3`): a frontend moves between classes by a plain set
 * element delete and add, which the kernel commits without validating the
 * table (a verdict element would make it walk every verdict map).
 */
export function classSetName(chain: string): string {
  return CLASS_SET_PREFIX + chain;
}

/** The class chain whose frontends set `name` holds, or undefined for any other set. */
export function classOfSet(name: string): string | undefined {
  if (!name.startsWith(CLASS_SET_PREFIX)) return undefined;
  const chain = name.slice(CLASS_SET_PREFIX.length);
  return parseClassChain(chain) === undefined ? undefined : chain;
}

/** The class chain a verdict (`goto dnat-tcp-3`) goes to, or undefined for any other verdict. */
export function classOfVerdict(verdict: string | undefined): string | undefined {
  if (verdict === undefined || !verdict.startsWith("goto ")) return undefined;
  const chain = verdict.slice(5);
  return parseClassChain(chain) === undefined ? undefined : chain;
}

/** nftables' NFT_NAME_MAXLEN is 256 including the NUL. */
export const NAME_MAX = 255;
/** Room left for the longest prefix (`external-`, `affinity-`, `firewall-`). */
const BASE_MAX = NAME_MAX - 16;

const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

const K = new Uint32Array([
  0x428a2f98,
  0x71374491,
  0xb5c0fbcf,
  0xe9b5dba5,
  0x3956c25b,
  0x59f111f1,
  0x923f82a4,
  0xab1c5ed5,
  0xd807aa98,
  0x12835b01,
  0x243185be,
  0x550c7dc3,
  0x72be5d74,
  0x80deb1fe,
  0x9bdc06a7,
  0xc19bf174,
  0xe49b69c1,
  0xefbe4786,
  0x0fc19dc6,
  0x240ca1cc,
  0x2de92c6f,
  0x4a7484aa,
  0x5cb0a9dc,
  0x76f988da,
  0x983e5152,
  0xa831c66d,
  0xb00327c8,
  0xbf597fc7,
  0xc6e00bf3,
  0xd5a79147,
  0x06ca6351,
  0x14292967,
  0x27b70a85,
  0x2e1b2138,
  0x4d2c6dfc,
  0x53380d13,
  0x650a7354,
  0x766a0abb,
  0x81c2c92e,
  0x92722c85,
  0xa2bfe8a1,
  0xa81a664b,
  0xc24b8b70,
  0xc76c51a3,
  0xd192e819,
  0xd6990624,
  0xf40e3585,
  0x106aa070,
  0x19a4c116,
  0x1e376c08,
  0x2748774c,
  0x34b0bcb5,
  0x391c0cb3,
  0x4ed8aa4a,
  0x5b9cca4f,
  0x682e6ff3,
  0x748f82ee,
  0x78a5636f,
  0x84c87814,
  0x8cc70208,
  0x90befffa,
  0xa4506ceb,
  0xbef9a3f7,
  0xc67178f2,
]);
const W = new Uint32Array(64);
const encoder = new TextEncoder();
const BUF = new Uint8Array(1024);
const BUF_VIEW = new DataView(BUF.buffer);

/**
 * First word pair of SHA-256(s) (FIPS 180-4). A small synchronous
 * implementation: node:crypto's createHash costs ~20 us per call here, which
 * dominates building 30k services.
 */
function sha256Head(s: string): [number, number] {
  // Reuse one buffer: allocation per call shows up as GC time at 30k services.
  let len = s.length * 3 + 72 <= BUF.length ? encoder.encodeInto(s, BUF).written : -1;
  let buf = BUF;
  if (len < 0) {
    const msg = encoder.encode(s);
    buf = new Uint8Array(msg.length + 72);
    buf.set(msg);
    len = msg.length;
  }
  const blocks = ((len + 8) >> 6) + 1;
  const end = blocks * 64;
  buf.fill(0, len, end);
  buf[len] = 0x80;
  const bitLen = len * 8;
  const dv = buf === BUF ? BUF_VIEW : new DataView(buf.buffer);
  dv.setUint32(end - 8, Math.floor(bitLen / 0x100000000));
  dv.setUint32(end - 4, bitLen >>> 0);
  let h0 = 0x6a09e667, h1 = 0xbb67ae85, h2 = 0x3c6ef372, h3 = 0xa54ff53a;
  let h4 = 0x510e527f, h5 = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19;
  for (let off = 0; off < end; off += 64) {
    for (let i = 0; i < 16; i++) W[i] = dv.getUint32(off + 4 * i);
    for (let i = 16; i < 64; i++) {
      const a = W[i - 15], b = W[i - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7;
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h0 = (h0 + a) | 0;
    h1 = (h1 + b) | 0;
    h2 = (h2 + c) | 0;
    h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0;
    h5 = (h5 + f) | 0;
    h6 = (h6 + g) | 0;
    h7 = (h7 + h) | 0;
  }
  return [h0 >>> 0, h1 >>> 0];
}

/** First 8 characters of the RFC 4648 base32 encoding of sha256(s). */
export function hash8(s: string): string {
  const [w0, w1] = sha256Head(s);
  // 8 base32 characters = the first 40 bits: all of w0 and the top byte of w1.
  const hi = w0, lo = w1 >>> 24;
  let out = "";
  for (let i = 0; i < 8; i++) {
    const shift = 35 - 5 * i; // bit offset of this 5-bit group within the 40 bits
    const v = shift >= 8
      ? (shift - 8 >= 27 ? hi >>> (shift - 8) : (hi >>> (shift - 8)) & 31)
      : ((hi << (8 - shift)) | (lo >>> shift)) & 31;
    out += B32[v & 31];
  }
  return out;
}

/** `HASH-base`, truncated (keeping it unique through the hash) to fit any prefix. */
export function hashAndTruncate(base: string): string {
  const name = `${hash8(base)}-${base}`;
  return name.length > BASE_MAX ? name.slice(0, BASE_MAX - 3) + "..." : name;
}

/** The readable base of a service port's names: `ns/name/proto/portName`. */
export function servicePortBase(svc: ServicePortInfo): string {
  return `${svc.namespace}/${svc.name}/${svc.protocol.toLowerCase()}/${svc.portName}`;
}

/** All chain names of one service port. */
export interface ServiceChainNames {
  /** Cluster traffic policy chain (all usable endpoints). */
  cluster: string;
  /** Local traffic policy chain (endpoints on this node). */
  local: string;
  /** Entry for NodePort / externalIP / LoadBalancer traffic. */
  external: string;
  /** loadBalancerSourceRanges filter. */
  firewall: string;
}

/** Chain names for a service port; computed once per build. */
export function serviceChainNames(svc: ServicePortInfo): ServiceChainNames {
  const h = hashAndTruncate(servicePortBase(svc));
  return {
    cluster: `service-${h}`,
    local: `local-${h}`,
    external: `external-${h}`,
    firewall: `firewall-${h}`,
  };
}

/**
 * Name of the ClientIP-affinity set of one endpoint of a service port:
 * `affinity-HASH-ns/name/proto/port__ip/port`. IPv6 colons become dots, as
 * colons are not allowed in nft identifiers.
 */
export function affinitySetName(svc: ServicePortInfo, ip: string, port: number): string {
  const base = `${servicePortBase(svc)}__${ip.replaceAll(":", ".")}/${port}`;
  return `affinity-${hashAndTruncate(base)}`;
}
