/**
 * This node's lifecycle, as upstream's NodeManager (pkg/proxy/node.go, 1.37) has it: the agent
 * exits with status 1 when its Node's IPs change (`OnNodeChange`) or its Node is deleted
 * (`OnNodeDelete`), leaving its rules in place, so that the DaemonSet restarts it and the next
 * start reads the new addresses and adopts the rules. The IPs choose the IP families programmed
 * and the health servers' binds at start-up, which a live update cannot redo safely.
 *
 * Upstream logs "NodeIPs changed for the node" / "Node is being deleted" and posts no Event;
 * the agent also posts a Warning Event on the Node ({@link NODE_IPS_CHANGED},
 * {@link NODE_DELETED}) so that `kubectl get events` shows why the pod restarted. PodCIDR
 * changes (which upstream also exits on with --detect-local-mode=NodeCIDR) are applied live:
 * the rules read the Node's podCIDRs on each full sync.
 *
 * @module
 */
import type { NodeEvent } from "./kube/events.ts";
import type { ProxyInformerHandlers } from "./kube/informers.ts";
import type { V1Node } from "../proxier/k8s_types.ts";

/** The Warning Event posted before exiting for an IP change (upstream posts none). */
const NODE_IPS_CHANGED: NodeEvent = {
  type: "Warning",
  reason: "NodeIPsChanged",
  action: "StopKubeProxy",
  note: "",
};

/** The Warning Event posted before exiting for the Node's deletion (upstream posts none). */
const NODE_DELETED: NodeEvent = {
  type: "Warning",
  reason: "NodeDeleted",
  action: "StopKubeProxy",
  note: "",
};

/** Why the agent must exit: upstream's log line and fields, and the Event. */
export interface NodeExit {
  /** Upstream's log line. */
  message: string;
  /** Its structured fields. */
  fields: Record<string, unknown>;
  /** The Warning Event to post. */
  event: NodeEvent;
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/** Whether `s` parses as an IP address (upstream's ParseIPSloppy skips what does not). */
function isIP(s: string): boolean {
  if (IPV4.test(s)) return s.split(".").every((o) => Number(o) <= 255);
  return s.includes(":") && /^[0-9a-fA-F:.]+$/.test(s);
}

/**
 * The Node's IPs as upstream's `GetNodeHostIPs` (pkg/util/node) picks them: every InternalIP,
 * then every ExternalIP; the first of those, and the first of the other family if any.
 */
export function upstreamNodeIPs(node: V1Node | undefined): string[] {
  const addrs = node?.status?.addresses ?? [];
  const all: string[] = [];
  for (const type of ["InternalIP", "ExternalIP"]) {
    for (const a of addrs) if (a.type === type && a.address && isIP(a.address)) all.push(a.address);
  }
  if (all.length === 0) return [];
  const v6 = (ip: string) => ip.includes(":");
  const other = all.find((ip) => v6(ip) !== v6(all[0]));
  return other === undefined ? [all[0]] : [all[0], other];
}

/**
 * Decides, for each Node event, whether the agent must exit. It starts from the Node read at
 * start-up; like upstream it keeps the newest Node even when it has no IPs (that is logged and
 * ignored, and the next Node with IPs is compared against none, so it exits).
 */
export class NodeLifecycle {
  #ips: string[];
  #name: string;

  /** `start` is the Node the agent was built from (undefined if it never appeared). */
  constructor(nodeName: string, start: V1Node | undefined) {
    this.#name = nodeName;
    this.#ips = upstreamNodeIPs(start);
  }

  /** The IPs the running agent was built for (or last saw). */
  get ips(): readonly string[] {
    return this.#ips;
  }

  /** A Node add or update: an exit when its IPs differ from the last ones. */
  changed(node: V1Node): NodeExit | "no-ips" | undefined {
    const old = this.#ips;
    const ips = upstreamNodeIPs(node);
    this.#ips = ips;
    if (ips.length === 0) return "no-ips";
    if (ips.length === old.length && ips.every((ip, i) => ip === old[i])) return undefined;
    const note = `Node IPs changed from ${old.join(",") || "none"} to ${ips.join(",")}; ` +
      "kube-proxy exits so that its restart uses the new addresses (rules stay in place)";
    return {
      message: "NodeIPs changed for the node",
      fields: { node: this.#name, newNodeIPs: ips.join(","), oldNodeIPs: old.join(",") },
      event: { ...NODE_IPS_CHANGED, note },
    };
  }

  /** The Node was deleted: always an exit. */
  deleted(): NodeExit {
    return {
      message: "Node is being deleted",
      fields: { node: this.#name },
      event: {
        ...NODE_DELETED,
        note: "Node deleted; kube-proxy exits (rules stay in place until its restart adopts them)",
      },
    };
  }
}

/** Where {@link guardNodeHandlers} reports. */
export interface NodeGuardHooks {
  /** The Node lost its IPs: logged, not an exit (upstream's "Failed to retrieve NodeIPs"). */
  noIPs(node: V1Node): void;
  /** The agent must exit; called once. */
  exit(why: NodeExit): void;
}

/**
 * Wraps the Node informer's handlers: the lifecycle decides first; an event the agent survives
 * goes on to the engine, one it exits for does not (the rules stay as they were, for the restart
 * to adopt). After the first exit verdict further events are ignored.
 */
export function guardNodeHandlers(
  handlers: Required<ProxyInformerHandlers>,
  lifecycle: NodeLifecycle,
  hooks: NodeGuardHooks,
): Required<ProxyInformerHandlers> {
  const inner = handlers.node;
  let exiting = false;
  /** Whether the event goes on to the engine. */
  const survives = (n: V1Node | null): boolean => {
    if (exiting) return false;
    const v = n === null ? lifecycle.deleted() : lifecycle.changed(n);
    if (v === undefined) return true;
    if (v === "no-ips") {
      hooks.noIPs(n!);
      return true;
    }
    exiting = true;
    hooks.exit(v);
    return false;
  };
  const node: Required<ProxyInformerHandlers>["node"] = {
    onAdd: (o) => survives(o as V1Node) && inner.onAdd(o),
    onUpdate: (a, b) => survives(b as V1Node) && inner.onUpdate(a, b),
    onDelete: (o) => survives(null) && inner.onDelete(o),
  };
  if (inner.onSynced) node.onSynced = inner.onSynced;
  return { ...handlers, node };
}
