/**
 * The datatypes of the in-memory nftables: how set keys and map values are
 * parsed, checked and printed in canonical form (as nft lists them), and the
 * datatype of each `typeof` expression it knows.
 *
 * @module
 */
import {
  bigIntToBytes,
  formatIPv4Number,
  formatIPv6Bytes,
  ipToBigInt,
  parseIPv4Number,
  parseIPv6Bytes,
} from "../../../net/ip.ts";
import { invalid } from "./errors.ts";

/** One part of a (concatenated) set key or map value. */
export interface Part {
  /** Canonical text, as nft lists it. */
  text: string;
  /** Closed numeric range covered, for interval overlap checks. */
  lo: bigint;
  /** Upper end of the range. */
  hi: bigint;
  /** References a chain (verdict `jump X` / `goto X`). */
  chain?: string;
}

/** A datatype the fake understands. */
export interface DataType {
  /** The nft type name (`ipv4_addr`, `inet_service`, ...). */
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

/** The datatypes the in-memory nftables knows, by nft name. */
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

/** The text of a quoted nft string, unescaped; other text as it is. */
export function unquote(s: string): string {
  return s.length >= 2 && s.startsWith('"') && s.endsWith('"')
    ? s.slice(1, -1).replaceAll('\\"', '"').replaceAll("\\\\", "\\")
    : s;
}

/**
 * The datatype of each expression nft accepts after `typeof` that the fake
 * knows. `numgen random mod N` has no fixed modulus in its type: any lookup
 * with a numgen key may use the set.
 */
export function typeofDatatype(expr: string, what: string): string {
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
export function parseTypeList(type: string, what: string, allowVerdict: boolean): DataType[] {
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
