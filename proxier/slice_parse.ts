/**
 * One EndpointSlice as the endpoints tracker keeps it: validated, its endpoints built once per
 * port, sorted by address and de-duplicated (endpoint_dedup.ts). Bad ports and endpoints are
 * skipped with one log line each; the rest of the slice is used.
 *
 * @module
 */

import { canonicalIP } from "../net/ip.ts";
import type { Protocol } from "./model.ts";
import { PackedEndpoint } from "./packed_endpoint.ts";
import type { IpFamily } from "../net/family.ts";
import {
  type EndpointSlice,
  LABEL_HEADLESS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
} from "./k8s_types.ts";
import { consoleLog, type LogFn } from "../net/log.ts";
import { intern } from "./intern.ts";
import { objectKey } from "./service_tracker.ts";
import { newerWins, NO_TARGET, targetId } from "./endpoint_dedup.ts";
import { addressKey, compareKeys, type ParsedSlice, type SlicePort } from "./slice_merge.ts";

/** Key of one Service port's endpoint list inside a Service: family, port name, protocol. */
export function portKey(family: IpFamily, portName: string, protocol: Protocol): string {
  return `${family}|${portName}|${protocol}`;
}

const PROTOCOLS: ReadonlySet<string> = new Set(["TCP", "UDP", "SCTP"]);

/** Logs one skipped part of a slice: `field` is `value`, `expected` was wanted. */
type BadField = (field: string, value: unknown, expected: string, what: string) => void;

/** What identifies a usable slice of ours. */
interface SliceHead {
  ns: string;
  name: string;
  svcName: string;
  family: IpFamily;
}

/**
 * The namespace, name, Service and family of `slice`, or null when it is unusable (logged) or
 * not ours (headless, another proxy's, FQDN: silently).
 */
function sliceHead(slice: EndpointSlice, log: LogFn): SliceHead | null {
  const ns = slice?.metadata?.namespace;
  const name = slice?.metadata?.name;
  const svcName = slice?.metadata?.labels?.[LABEL_SERVICE_NAME];
  const id = `${ns}/${name}`;
  if (!ns || !name) {
    log("error", "ignoring EndpointSlice without metadata.namespace/metadata.name", {
      namespace: ns,
      name,
    });
    return null;
  }
  const labels = slice.metadata?.labels;
  // Upstream's informer filters these out; slices of headless or foreign Services are not ours.
  if (labels?.[LABEL_HEADLESS] !== undefined || labels?.[LABEL_SERVICE_PROXY_NAME] !== undefined) {
    return null;
  }
  if (slice.addressType === "FQDN") return null;
  if (!svcName) {
    log("warn", `endpointslice ${id}: ignoring it: label ${LABEL_SERVICE_NAME} is missing`, {
      endpointSlice: id,
      field: `metadata.labels[${LABEL_SERVICE_NAME}]`,
      expected: "the name of the Service the slice belongs to",
    });
    return null;
  }
  if (slice.addressType === "IPv4") return { ns, name, svcName, family: 4 };
  if (slice.addressType === "IPv6") return { ns, name, svcName, family: 6 };
  log(
    "error",
    `endpointslice ${id}: ignoring it: addressType is ${
      JSON.stringify(slice.addressType)
    }, expected IPv4, IPv6 or FQDN`,
    {
      endpointSlice: id,
      field: "addressType",
      value: slice.addressType,
      expected: "IPv4, IPv6 or FQDN",
    },
  );
  return null;
}

/** A slice port that passed validation. */
interface ValidPort {
  name: string;
  protocol: Protocol;
  port: number;
}

/** The valid ports of `slice`, in order; each bad one is skipped with a line through `bad`. */
function slicePorts(slice: EndpointSlice, bad: BadField): ValidPort[] {
  const ports: ValidPort[] = [];
  for (const [i, p] of (slice.ports ?? []).entries()) {
    // The API defaults name to "" and protocol to TCP.
    const pname = p?.name ?? "";
    const protocol = p?.protocol ?? "TCP";
    const what = `port ${JSON.stringify(pname)}`;
    if (typeof pname !== "string") {
      bad(`ports[${i}].name`, pname, "a string", "port");
    } else if (!PROTOCOLS.has(protocol)) {
      bad(`ports[${i}].protocol`, protocol, "TCP, UDP or SCTP", what);
    } else if (
      typeof p.port !== "number" || !Number.isInteger(p.port) || p.port < 1 || p.port > 65535
    ) {
      bad(`ports[${i}].port`, p.port ?? null, "an integer from 1 to 65535", what);
    } else if (ports.some((q) => q.name === pname && q.protocol === protocol)) {
      bad(`ports[${i}].name`, pname, "a name unique within the slice", what);
    } else {
      ports.push({ name: pname, protocol: protocol as Protocol, port: p.port });
    }
  }
  return ports;
}

type SliceEndpoint = NonNullable<EndpointSlice["endpoints"]>[number];

/** The endpoint of `ep` (address `addr`, already checked: an IPv4 one as its number) on `port`. */
function endpointInfo(
  ep: SliceEndpoint,
  addr: string | number,
  port: number,
  nodeName: string,
): PackedEndpoint {
  const c = ep.conditions;
  const hints = ep.hints;
  const zoneHints = hints ? names(hints.forZones) : undefined;
  const nodeHints = hints ? names(hints.forNodes) : undefined;
  return PackedEndpoint.of({
    ip: addr,
    port,
    ready: c?.ready ?? true,
    // As upstream's endpointslicecache.go: an unset `serving` is true, not a copy of `ready`,
    // so a terminating endpoint whose controller never set `serving` is a fallback candidate.
    serving: c?.serving ?? true,
    terminating: c?.terminating ?? false,
    isLocal: ep.nodeName === nodeName && nodeName !== "",
    nodeName: ep.nodeName || undefined,
    zone: ep.zone || undefined,
    zoneHints: zoneHints?.length ? zoneHints : undefined,
    nodeHints: nodeHints?.length ? nodeHints : undefined,
  });
}

/** The endpoints of one slice on one port, and their targets ({@link targetId}) when any. */
interface SliceList {
  eps: PackedEndpoint[];
  /** Parallel to `eps`; undefined when no endpoint has a targetRef. */
  targets: number[] | undefined;
}

/**
 * The valid endpoints of `slice` on `port`, one per address, sorted by address. Within one
 * slice a repeated address is decided as across slices (endpoint_dedup.ts), a later position
 * counting as newer. Each address is parsed once, into its sort key; a slice already in order
 * (hence without repeats) is kept as it is, anything else is sorted once, repeats side by side.
 */
function sliceEndpoints(
  slice: EndpointSlice,
  family: IpFamily,
  port: number,
  nodeName: string,
  bad: BadField,
): SliceList {
  const eps: PackedEndpoint[] = [];
  const keys: (number | string)[] = [];
  const ts: number[] = [];
  let anyTarget = false;
  let ordered = true;
  const raw = slice.endpoints ?? [];
  for (let i = 0; i < raw.length; i++) {
    const ep = raw[i];
    // Upstream uses only the first address; the API allows exactly one.
    const addr = ep?.addresses?.[0];
    const key = typeof addr === "string" ? addressKey(addr, family) : null;
    if (key === null) {
      bad(`endpoints[${i}].addresses[0]`, addr ?? null, `an IPv${family} address`, "endpoint");
      continue;
    }
    // An IPv4 address is kept as its number; the text is made when read.
    const kept = typeof key === "number" ? key : canonicalIP(addr!)!;
    const t = targetId(ep.targetRef);
    if (t !== NO_TARGET) anyTarget = true;
    if (ordered && keys.length > 0 && !(key > keys[keys.length - 1])) ordered = false;
    eps.push(endpointInfo(ep, kept, port, nodeName));
    keys.push(key);
    ts.push(t);
  }
  if (ordered) return { eps: exact(eps), targets: anyTarget ? exact(ts) : undefined };
  return sortUnique(eps, keys, ts, anyTarget);
}

/**
 * `list` in a backing store of its own length: one grown by push keeps up to half again
 * (at least 16 slots), and these lists are kept for the Service's life.
 */
function exact<T>(list: T[]): T[] {
  return list.slice();
}

/** `eps` sorted by `keys`; of a repeated address the copy endpoint_dedup.ts picks, in order. */
function sortUnique(
  eps: PackedEndpoint[],
  keys: (number | string)[],
  ts: number[],
  anyTarget: boolean,
): SliceList {
  const order = eps.map((_, i) => i).sort((a, b) => compareKeys(keys[a], keys[b]) || a - b);
  const out: PackedEndpoint[] = [];
  const outT: number[] = [];
  let last: number | string | null = null;
  for (const i of order) {
    const k = out.length - 1;
    if (k >= 0 && keys[i] === last) {
      // The same address again, from a later position: the newer copy.
      if (newerWins(out[k], outT[k], eps[i], ts[i])) {
        out[k] = eps[i];
        outT[k] = ts[i];
      }
      continue;
    }
    last = keys[i];
    out.push(eps[i]);
    outT.push(ts[i]);
  }
  return { eps: exact(out), targets: anyTarget ? exact(outT) : undefined };
}

/**
 * Validates one EndpointSlice. Returns null when the slice is not usable at
 * all (FQDN address type, no service-name label, unknown address type) or
 * not ours (labelled headless or service-proxy-name, silently);
 * bad ports and endpoints are skipped with one log line each.
 */
export function parseEndpointSlice(
  slice: EndpointSlice,
  nodeName: string,
  log: LogFn = consoleLog,
): ParsedSlice | null {
  const head = sliceHead(slice, log);
  if (head === null) return null;
  const { ns, name, svcName, family } = head;
  const id = `${ns}/${name}`;
  const bad: BadField = (field, value, expected, what) => {
    log(
      "error",
      `endpointslice ${id}: ignoring ${what}: ${field} is ${
        JSON.stringify(value)
      }, expected ${expected}`,
      { endpointSlice: id, field, value, expected },
    );
  };
  const ports = slicePorts(slice, bad);
  // Endpoints are built for the first port directly; other ports get copies.
  const firstPort = ports.length > 0 ? ports[0].port : 0;
  const { eps: first, targets } = sliceEndpoints(slice, family, firstPort, nodeName, bad);
  const parsedPorts: SlicePort[] = ports.map((p, k) => ({
    // Every slice of a Service port has the same key: one shared copy.
    key: intern(portKey(family, p.name, p.protocol)),
    port: p.port,
    endpoints: k === 0 ? first : first.map((e) => e.withPort(p.port)),
  }));
  const out: ParsedSlice = { service: objectKey(ns, svcName), name, family, ports: parsedPorts };
  if (targets) out.targets = targets;
  return out;
}

function names(list: readonly { name?: string | null }[] | null | undefined): string[] {
  const out: string[] = [];
  if (!list) return out;
  for (const h of list) {
    if (typeof h?.name === "string" && h.name !== "" && !out.includes(h.name)) out.push(h.name);
  }
  return out.sort();
}
