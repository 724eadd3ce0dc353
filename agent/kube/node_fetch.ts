/**
 * This node's Node object at start-up, read before anything else is built:
 * its IPs choose the IP families the agent programs. Upstream's `getNodeIPs`
 * (cmd/kube-proxy/app/server.go, called from `newProxyServer`): GET the Node
 * with exponential backoff, six tries from 1 s doubling with 20 % jitter
 * (about 31 s), until it exists and has an IP, logging each failure. After
 * the last try the agent goes on without node IPs (upstream then assumes
 * loopback; the caller runs IPv4 only).
 *
 * @module
 */
import { ApiFetch } from "./api_fetch.ts";
import type { Logger } from "../log.ts";
import { httpStatus, timedRequest } from "./rest_metrics.ts";
import { slimNode } from "./slim.ts";
import type { V1Node } from "../../proxier/k8s_types.ts";

/** Upstream's `wait.Backoff` for the Node: Steps 6, Duration 1 s, Factor 2, Jitter 0.2. */
export interface NodeBackoff {
  /** How many GETs at most. */
  steps: number;
  /** The first wait, milliseconds. */
  initialMs: number;
  /** What each wait is multiplied by. */
  factor: number;
  /** Up to this fraction of a wait is added at random. */
  jitter: number;
}

/** The backoff upstream's getNodeIPs uses. */
const NODE_BACKOFF: NodeBackoff = { steps: 6, initialMs: 1000, factor: 2, jitter: 0.2 };

/** Options of {@link fetchNode}. */
export interface FetchNodeOptions {
  /** The API server connection. */
  api: ApiFetch;
  /** This node's name. */
  nodeName: string;
  /** Logger. */
  log: Logger;
  /** Aborts the wait (SIGTERM during start-up). */
  signal?: AbortSignal;
  /** The backoff (default {@link NODE_BACKOFF}; tests shorten it). */
  backoff?: NodeBackoff;
}

/** The Node's primary addresses, as upstream's GetNodeHostIPs picks them (InternalIP, else ExternalIP). */
export function nodeHostIPs(node: V1Node | undefined): string[] {
  const addrs = node?.status?.addresses ?? [];
  for (const type of ["InternalIP", "ExternalIP"]) {
    const ips = addrs.filter((a) => a.type === type && a.address).map((a) => a.address!);
    if (ips.length > 0) return ips;
  }
  return [];
}

/** One GET of the Node (through client-node where native fetch cannot reach the cluster). */
async function getNode(api: ApiFetch, name: string, signal?: AbortSignal): Promise<V1Node> {
  if (await api.usable()) {
    const res = await api.get(`/api/v1/nodes/${encodeURIComponent(name)}`, {}, signal);
    if (res.status !== 200) throw await ApiFetch.statusError(res);
    return slimNode(await res.json()) as V1Node;
  }
  const { typedList } = await import("./client_node_fallback.ts");
  const kc = await api.credentials.clientNodeConfig();
  const path = "/api/v1/nodes";
  const list = await timedRequest(
    "GET",
    api.server + path,
    () => typedList(kc, path, { fieldSelector: `metadata.name=${name}` }),
    httpStatus,
  ) as {
    items?: V1Node[];
  };
  const node = list.items?.[0];
  if (node === undefined) throw new Error(`nodes "${name}" not found`);
  return slimNode(node as Record<string, unknown>) as V1Node;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done);
  });
}

/**
 * This node's Node, once it exists with an IP; else, after the backoff (or
 * an abort), the last Node seen without IPs, or undefined.
 */
export async function fetchNode(o: FetchNodeOptions): Promise<V1Node | undefined> {
  const b = o.backoff ?? NODE_BACKOFF;
  let last: V1Node | undefined;
  let delay = b.initialMs;
  for (let step = 0; step < b.steps && !o.signal?.aborted; step++) {
    if (step > 0) {
      await sleep(delay * (1 + Math.random() * b.jitter), o.signal);
      delay *= b.factor;
      if (o.signal?.aborted) break;
    }
    try {
      last = await getNode(o.api, o.nodeName, o.signal);
    } catch (err) {
      if (o.signal?.aborted) break;
      o.log.error("Failed to retrieve node info", err, { node: o.nodeName });
      continue;
    }
    const ips = nodeHostIPs(last);
    if (ips.length > 0) {
      o.log.info("Successfully retrieved node IP(s)", { IPs: ips.join(",") });
      return last;
    }
    o.log.error("Failed to retrieve node IPs", undefined, { node: o.nodeName });
  }
  return last;
}
