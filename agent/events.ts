/**
 * The Node Event kube-proxy emits when it starts (events.k8s.io/v1, reason "Starting", action
 * "StartKubeProxy", about this Node, in namespace "default" as client-go's recorder files
 * Events about cluster-scoped objects). Operators and tests look for it with
 * `kubectl get events --field-selector reason=Starting`.
 *
 * @module
 */
import type { ApiFetch } from "./api_fetch.ts";
import type { Logger } from "./log.ts";

/** The Event object for this node's start (pure, for tests). */
export function startingEvent(nodeName: string, now: Date): Record<string, unknown> {
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
    reportingInstance: `kube-proxy-${nodeName}`,
    action: "StartKubeProxy",
    reason: "Starting",
    type: "Normal",
    note: "",
    regarding: { kind: "Node", name: nodeName, uid: nodeName },
  };
}

/** Posts the start-up Event; a failure is only a warning (events are best effort). */
export async function postStartingEvent(
  api: ApiFetch,
  nodeName: string,
  log: Logger,
): Promise<void> {
  try {
    const res = await api.post(
      "/apis/events.k8s.io/v1/namespaces/default/events",
      startingEvent(nodeName, new Date()),
    );
    const text = await res.text();
    if (res.status >= 300) {
      log.warn("Could not record the start-up Event", {
        status: res.status,
        body: text.slice(0, 200),
      });
    }
  } catch (err) {
    log.warn("Could not record the start-up Event", { err: String(err) });
  }
}
