/**
 * client-go's rest client metrics, as component-base registers them for every Kubernetes
 * component: `rest_client_requests_total{code,method,host}` and
 * `rest_client_request_duration_seconds{verb,host}`. Every request this agent sends to the API
 * server (list pages, watches, the reachability probe, Events) goes through
 * {@link timedRequest}, so the standard kube-proxy dashboards' API panels work unchanged.
 *
 * The sink is process-wide, like client-go's metrics adapters: the agent registers it once its
 * registry exists; before that (and in tests that do not register one) requests are not counted.
 *
 * @module
 */
import { Counter, Histogram, type Registry } from "../../net/prometheus.ts";

/** component-base's buckets for rest_client_request_duration_seconds. */
export const REST_CLIENT_BUCKETS: readonly number[] = [
  0.005,
  0.025,
  0.1,
  0.25,
  0.5,
  1,
  2,
  4,
  8,
  15,
  30,
  60,
];

/** The two families, on a registry. */
export interface RestClientMetrics {
  /** rest_client_requests_total by code, method and host. */
  requests: Counter<"code" | "method" | "host">;
  /** rest_client_request_duration_seconds by verb and host. */
  duration: Histogram<"verb" | "host">;
}

/** Registers the rest client families on `registry`. */
export function createRestClientMetrics(registry: Registry): RestClientMetrics {
  return {
    requests: new Counter({
      name: "rest_client_requests_total",
      help: "Number of HTTP requests, partitioned by status code, method, and host.",
      labelNames: ["code", "method", "host"],
      registers: [registry],
    }),
    duration: new Histogram({
      name: "rest_client_request_duration_seconds",
      help: "Request latency in seconds. Broken down by verb, and host.",
      labelNames: ["verb", "host"],
      buckets: [...REST_CLIENT_BUCKETS],
      registers: [registry],
    }),
  };
}

let sink: RestClientMetrics | undefined;

/** Makes `m` the process-wide sink (undefined stops counting). */
export function setRestClientMetrics(m: RestClientMetrics | undefined): void {
  sink = m;
}

/** Counts one finished request; `code` is the HTTP status, or undefined when none came back. */
export function recordRequest(
  method: string,
  url: string | URL,
  code: number | undefined,
  seconds: number,
): void {
  if (!sink) return;
  let host = "";
  try {
    host = new URL(url).host;
  } catch { /* not a URL: leave the host empty */ }
  // client-go's label for a request that got no response.
  sink.requests.inc({ code: code === undefined ? "<error>" : String(code), method, host });
  sink.duration.observe({ verb: method, host }, seconds);
}

/**
 * Runs a request and counts it. As client-go does, latency runs until the response (its headers,
 * for a watch) arrives. `statusOf` reads the HTTP status from a result or from an error (an
 * error with a status is an answered request).
 */
export async function timedRequest<T>(
  method: string,
  url: string | URL,
  send: () => Promise<T>,
  statusOf: (resultOrError: unknown) => number | undefined,
): Promise<T> {
  const t0 = performance.now();
  try {
    const r = await send();
    recordRequest(method, url, statusOf(r), (performance.now() - t0) / 1000);
    return r;
  } catch (e) {
    recordRequest(method, url, statusOf(e), (performance.now() - t0) / 1000);
    throw e;
  }
}

/** The HTTP status of a fetch Response or of a client-node ApiException (`code`). */
export function httpStatus(x: unknown): number | undefined {
  if (x instanceof Response) return x.status;
  if (typeof x === "object" && x !== null) {
    const o = x as { code?: unknown; statusCode?: unknown; httpStatusCode?: unknown };
    for (const v of [o.code, o.statusCode, o.httpStatusCode]) {
      if (typeof v === "number" && v >= 100 && v < 600) return v;
    }
  }
  return undefined;
}
