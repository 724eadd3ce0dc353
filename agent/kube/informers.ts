/**
 * The proxy's informers: Services, EndpointSlices, this node's Node and ServiceCIDRs, each a
 * {@link WatchSupervisor} (watch_supervisor.ts) with kube-proxy's selectors, listing slim
 * pages over native fetch (client-node's typed clients where native fetch cannot reach the
 * cluster). {@link startProxyInformers} also probes the API server: a crashed server's watches
 * die without an error on this runtime, so once it has been unreachable and answers again,
 * every watch is restarted at once instead of waiting for the watchdog.
 * @module
 */
import type { Logger } from "../log.ts";
import type { ApiFetch } from "./api_fetch.ts";
import { type ListStream, pagedList } from "./paged_list.ts";
import { httpStatus, timedRequest } from "./rest_metrics.ts";
import { ApiProbe, reachable } from "./api_probe.ts";
import { identityStub, slimEndpointSlice, slimNode, slimService, slimServiceCIDR } from "./slim.ts";
import {
  type InformerHandlers,
  type KubeList,
  type ListFn,
  WatchSupervisor,
  type WatchSupervisorOptions,
} from "./watch_supervisor.ts";

/** Label selector of kube-proxy's EndpointSlice informer. */
const ENDPOINTSLICE_SELECTOR =
  "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

/** Label selector of kube-proxy's Service informer (skip services owned by another proxy). */
const SERVICE_SELECTOR = "!service.kubernetes.io/service-proxy-name";

/** Handlers for every resource, all optional. */
export interface ProxyInformerHandlers {
  /** core/v1 Services. */
  services?: InformerHandlers<unknown>;
  /** discovery.k8s.io/v1 EndpointSlices. */
  endpointSlices?: InformerHandlers<unknown>;
  /** This node (core/v1 Node). */
  node?: InformerHandlers<unknown>;
  /** networking.k8s.io/v1 ServiceCIDRs. */
  serviceCIDRs?: InformerHandlers<unknown>;
}

/** Options of {@link startProxyInformers}. */
export interface ProxyInformerOptions {
  /** The API server connection. */
  api: ApiFetch;
  /** This node's name (field selector of the Node informer). */
  nodeName: string;
  /** Callbacks per resource; resources without handlers are not watched. */
  handlers: ProxyInformerHandlers;
  /** Watch health reports (e.g. ProxierHealthServer.setWatchHealthy). */
  onHealth?: (resource: string, ok: boolean) => void;
  /** Logger. */
  log?: Logger;
  /** Supervisor timings (tests shorten them). */
  timing?:
    & Pick<
      WatchSupervisorOptions<unknown>,
      "initialBackoffMs" | "maxBackoffMs" | "watchdogMs"
    >
    & {
      /** API server probe interval (default 10 s; 0 disables). */
      probeIntervalMs?: number;
    };
}

/** The running informers. */
export interface ProxyInformers {
  /** One supervisor per watched resource. */
  supervisors: WatchSupervisor<unknown>[];
  /** True when every informer has delivered its first list. */
  synced(): boolean;
  /** Stops everything. */
  stop(): Promise<void>;
}

/** A slimming function: the fields the proxy reads, of one API object. */
type Slim = (o: Record<string, unknown>) => Record<string, unknown>;

/**
 * Lists `path` in pages over native fetch, each handed to `stream` as it arrives (slimmed by
 * `slim` when given); where native fetch cannot reach the cluster (https without
 * verification), all at once through client-node's typed clients.
 */
function lister(api: ApiFetch, path: string, slim: Slim | undefined): ListFn<unknown> {
  return async (q, stream) => {
    if (await api.usable()) {
      return await pagedList(api, path, q, slim, {
        stream: stream as ListStream | undefined,
      }) as Awaited<ReturnType<ListFn<unknown>>>;
    }
    const { typedList } = await import("./client_node_fallback.ts");
    const kc = await api.credentials.clientNodeConfig();
    const res = await timedRequest(
      "GET",
      api.server + path,
      () => typedList(kc, path, q),
      httpStatus,
    );
    const list = res as KubeList<Record<string, unknown>>;
    if (slim) list.items = list.items.map(slim);
    return list as Awaited<ReturnType<ListFn<unknown>>>;
  };
}

/** One watched resource: its supervisor's name, path, slimming and selectors. */
interface Resource {
  name: string;
  path: string;
  handlers: keyof ProxyInformerHandlers;
  slim: Slim;
  /**
   * Listed objects go to the handlers whole: their consumers (the trackers) parse each one
   * and keep none of it, and slimming 60k listed objects costs a tenth of a 30k cold start.
   * Watch events are still slimmed.
   */
  listWhole?: boolean;
  extra: (nodeName: string) => Partial<WatchSupervisorOptions<unknown>>;
}

/** The resources kube-proxy watches, in start order. */
const RESOURCES: readonly Resource[] = [
  {
    name: "services",
    path: "/api/v1/services",
    handlers: "services",
    slim: slimService,
    listWhole: true,
    extra: () => ({ labelSelector: SERVICE_SELECTOR, stub: identityStub }),
  },
  {
    name: "endpointslices",
    path: "/apis/discovery.k8s.io/v1/endpointslices",
    handlers: "endpointSlices",
    slim: slimEndpointSlice,
    listWhole: true,
    extra: () => ({ labelSelector: ENDPOINTSLICE_SELECTOR, stub: identityStub }),
  },
  {
    name: "node",
    path: "/api/v1/nodes",
    handlers: "node",
    slim: slimNode,
    extra: (nodeName) => ({ fieldSelector: `metadata.name=${nodeName}` }),
  },
  {
    name: "servicecidrs",
    path: "/apis/networking.k8s.io/v1/servicecidrs",
    handlers: "serviceCIDRs",
    slim: slimServiceCIDR,
    extra: () => ({ optional: true }),
  },
];

/** Starts the Service, EndpointSlice, Node and ServiceCIDR informers. */
export function startProxyInformers(opts: ProxyInformerOptions): ProxyInformers {
  const api = opts.api;
  const sups: WatchSupervisor<unknown>[] = [];
  for (const r of RESOURCES) {
    const handlers: InformerHandlers<unknown> | undefined = opts.handlers[r.handlers];
    if (!handlers) continue;
    sups.push(
      new WatchSupervisor({
        api,
        onHealth: opts.onHealth,
        log: opts.log,
        ...opts.timing,
        name: r.name,
        path: r.path,
        slim: r.slim,
        list: lister(api, r.path, r.listWhole ? undefined : r.slim),
        handlers,
        ...r.extra(opts.nodeName),
      }),
    );
  }
  for (const s of sups) s.start();
  const probe = new ApiProbe(
    () => reachable(api),
    (reason) => {
      for (const s of sups) s.restart(reason);
    },
    opts.timing?.probeIntervalMs ?? 10_000,
    opts.log,
  );
  probe.start();
  return {
    supervisors: sups,
    synced: () => sups.every((s) => s.synced),
    async stop() {
      probe.stop();
      await Promise.all(sups.map((s) => s.stop()));
    },
  };
}
