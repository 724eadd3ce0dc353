/**
 * The Node Events kube-proxy emits (cmd/kube-proxy/app/server.go), through events.k8s.io/v1 as
 * its client-go recorder does: about this Node, in namespace "default" (where the recorder files
 * Events about cluster-scoped objects), reporting controller "kube-proxy", reporting instance
 * "kube-proxy-<host name>".
 * - Normal `Starting`, action `StartKubeProxy`, empty note: the start-up event (its "birth cry").
 * - Warning `FailedToStartProxierHealthcheck` / `FailedToStartMetricServer`, action
 *   `StartKubeProxy`, the error as note: upstream sends these when a server cannot bind with
 *   bindAddressHardFail, and a bind failure is always fatal here.
 * Operators and tests look for them with `kubectl get events --field-selector reason=Starting`.
 *
 * @module
 */
import type { ApiFetch } from "./api_fetch.ts";
import type { Logger } from "../log.ts";

/** What an Event says. */
export interface NodeEvent {
  /** Normal or Warning. */
  type: "Normal" | "Warning";
  /** CamelCase reason, e.g. "Starting". */
  reason: string;
  /** What was being done, e.g. "StartKubeProxy". */
  action: string;
  /** Human-readable detail ("" for the start-up event). */
  note: string;
}

/** The start-up Event's content. */
const STARTING: NodeEvent = {
  type: "Normal",
  reason: "Starting",
  action: "StartKubeProxy",
  note: "",
};

/** The events.k8s.io/v1 Event object about `nodeName` (pure, for tests). */
export function nodeEvent(
  nodeName: string,
  e: NodeEvent,
  now: Date,
  host = "",
): Record<string, unknown> {
  const t = now.toISOString().replace("Z", "000Z"); // MicroTime: microseconds
  return {
    apiVersion: "events.k8s.io/v1",
    kind: "Event",
    metadata: {
      name: `${nodeName}.${(now.getTime() * 1e6).toString(16)}`,
      namespace: "default",
    },
    eventTime: t,
    reportingController: "kube-proxy",
    reportingInstance: `kube-proxy-${host || nodeName}`,
    action: e.action,
    reason: e.reason,
    type: e.type,
    note: e.note,
    regarding: { kind: "Node", name: nodeName, uid: nodeName },
  };
}

/** The start-up Event object (pure, for tests). */
export function startingEvent(nodeName: string, now: Date): Record<string, unknown> {
  return nodeEvent(nodeName, STARTING, now);
}

/** Posts an Event about this node; a failure is only a warning (events are best effort). */
export async function postNodeEvent(
  api: ApiFetch,
  nodeName: string,
  e: NodeEvent,
  log: Logger,
): Promise<void> {
  let host = "";
  try {
    host = Deno.hostname();
  } catch { /* no --allow-sys: the node name stands in */ }
  try {
    const res = await api.post(
      "/apis/events.k8s.io/v1/namespaces/default/events",
      nodeEvent(nodeName, e, new Date(), host),
    );
    const text = await res.text();
    if (res.status >= 300) {
      log.warn(`Could not record the ${e.reason} Event`, {
        status: res.status,
        body: text.slice(0, 200),
      });
    }
  } catch (err) {
    log.warn(`Could not record the ${e.reason} Event`, { err: String(err) });
  }
}

/** Posts the start-up Event. */
export function postStartingEvent(api: ApiFetch, nodeName: string, log: Logger): Promise<void> {
  return postNodeEvent(api, nodeName, STARTING, log);
}
