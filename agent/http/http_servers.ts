/**
 * The agent's HTTP servers: /healthz (ProxierHealthServer) and /metrics with
 * /configz, /statusz and /flagz, bound on their addresses or v1alpha2 CIDRs before anything else
 * starts, as upstream's Run does. A bind failure is fatal and is reported on
 * the Node as upstream reports it.
 *
 * @module
 */
import type { AgentConfig } from "../flags.ts";
import type { Logger } from "../log.ts";
import { createMetrics, type ProxyMetrics, serveMetrics } from "../metrics.ts";
import { setRestClientMetrics } from "../kube/rest_metrics.ts";
import { configzBody } from "./configz.ts";
import { zpagesFor } from "./zpages.ts";
import { bindAddressesFor, localIPs } from "./bind_addresses.ts";
import type { ApiFetch } from "../kube/api_fetch.ts";
import { type NodeEvent, postNodeEvent } from "../kube/events.ts";
import { ProxierHealthServer } from "./health.ts";

/** The listeners of a server: its v1alpha2 CIDRs resolved on this host, or its one address. */
function listenAddresses(
  cidrs: AgentConfig["healthzBindCIDRs"],
  address: string,
  ips: () => string[],
): string[] {
  if (!cidrs) return address ? [address] : [];
  const local = ips();
  return bindAddressesFor(cidrs, local, local.some((ip) => ip.includes(":")));
}

/** The HTTP servers and what they report on, up before the Node is fetched (upstream's order). */
export interface Servers {
  /** The metrics /metrics serves. */
  metrics: ProxyMetrics;
  /** The state /healthz and /livez report. */
  health: ProxierHealthServer;
  /** The API server connection. */
  api: ApiFetch;
  /** Stops every server. */
  close(): Promise<void>;
}

/** Binds /healthz and /metrics (not in a dry run); a bind failure is fatal and reported on the Node. */
export async function startServers(
  cfg: AgentConfig,
  log: Logger,
  nodeName: string,
  api: ApiFetch,
): Promise<Servers> {
  const metrics = createMetrics();
  // Every request to the API server from here on is counted (client-go's rest client metrics).
  setRestClientMetrics(metrics.restClient);
  const health = new ProxierHealthServer({
    healthTimeoutMs: 2 * cfg.syncPeriodMs,
    metrics,
    log: log.child("healthz"),
  });
  const servers: { close(): Promise<void> }[] = [health];
  const close = async () => {
    for (const s of servers) await s.close();
  };
  // A server that cannot bind is fatal (upstream's bindAddressHardFail); say so on the Node
  // first, with upstream's reason.
  const bindOrReport = async (reason: string, bind: () => void) => {
    try {
      bind();
    } catch (err) {
      const e: NodeEvent = { type: "Warning", reason, action: "StartKubeProxy", note: `${err}` };
      if (await api.usable()) await postNodeEvent(api, nodeName, e, log.child("events"));
      await close();
      throw err;
    }
  };
  if (!cfg.dryRun) {
    for (const addr of listenAddresses(cfg.healthzBindCIDRs, cfg.healthzBindAddress, localIPs)) {
      await bindOrReport("FailedToStartProxierHealthcheck", () => health.serve(addr));
    }
    for (const addr of listenAddresses(cfg.metricsBindCIDRs, cfg.metricsBindAddress, localIPs)) {
      await bindOrReport("FailedToStartMetricServer", () => {
        const m = serveMetrics(addr, metrics.registry, {
          configz: () => configzBody(cfg),
          ...zpagesFor(cfg),
        });
        servers.push({ close: () => m.shutdown() });
      });
    }
  }
  return { metrics, health, api, close };
}
