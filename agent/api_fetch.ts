/**
 * GET requests to the API server over Deno's native fetch, with the
 * credentials client-node's KubeConfig applies (headers, CA, client
 * certificate). Lists and watches go through here: client-node's typed
 * clients deserialize every object into classes (and its watch misses a
 * crashed server on Deno), which at 30k Services costs seconds.
 *
 * A cluster with `insecure-skip-tls-verify` over https cannot be expressed
 * with a Deno HTTP client: {@link ApiFetch.usable} says so, and callers keep
 * client-node's path there.
 *
 * @module
 */
import { HttpMethod, type KubeConfig, RequestContext } from "@kubernetes/client-node";
import { httpStatus, timedRequest } from "./rest_metrics.ts";

interface TlsOptions {
  ca?: string | Uint8Array;
  cert?: string | Uint8Array;
  key?: string | Uint8Array;
  rejectUnauthorized?: boolean;
}

function text(v: string | Uint8Array | undefined): string | undefined {
  return v === undefined ? undefined : typeof v === "string" ? v : new TextDecoder().decode(v);
}

/** Query parameters (undefined ones are left out). */
export type Query = Record<string, string | number | boolean | undefined>;

/** An HTTP error status from the API server. */
export class ApiStatusError extends Error {
  constructor(readonly statusCode: number, message: string, readonly reason?: string) {
    super(message);
    this.name = "ApiStatusError";
  }
}

/** Native-fetch GETs against the kubeconfig's current cluster. */
export class ApiFetch {
  readonly #kc: KubeConfig;
  #client: Deno.HttpClient | null | undefined;

  constructor(kc: KubeConfig) {
    this.#kc = kc;
  }

  /** The Deno HTTP client for this cluster, or null when only undici can talk to it. */
  async #httpClient(): Promise<Deno.HttpClient | null> {
    if (this.#client !== undefined) return this.#client;
    const server = this.#kc.getCurrentCluster()?.server ?? "";
    if (!server.startsWith("https:")) return (this.#client = null);
    const opts: TlsOptions = {};
    await this.#kc.applyToHTTPSOptions(opts as never);
    if (opts.rejectUnauthorized === false) return (this.#client = null);
    const ca = text(opts.ca);
    const cert = text(opts.cert);
    const key = text(opts.key);
    this.#client = Deno.createHttpClient({
      caCerts: ca ? [ca] : undefined,
      ...(cert && key ? { cert, key } : {}),
    });
    return this.#client;
  }

  /** False for an https cluster whose certificate must not be verified (native fetch cannot). */
  async usable(): Promise<boolean> {
    const server = this.#kc.getCurrentCluster()?.server ?? "";
    return !server.startsWith("https:") || (await this.#httpClient()) !== null;
  }

  /** GET `path` with `query`; resolves with the response (any status). */
  async get(path: string, query: Query, signal?: AbortSignal): Promise<Response> {
    const cluster = this.#kc.getCurrentCluster();
    if (!cluster) throw new Error("No currently active cluster");
    const url = new URL(cluster.server + path);
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    const ctx = new RequestContext(url.toString(), HttpMethod.GET);
    await this.#kc.applySecurityAuthentication(ctx);
    const client = await this.#httpClient();
    return await timedRequest("GET", url, () =>
      fetch(url, {
        headers: ctx.getHeaders(),
        ...(signal ? { signal } : {}),
        ...(client ? { client } : {}),
      }), httpStatus);
  }

  /** POST `body` as JSON to `path`; resolves with the response (any status). */
  async post(path: string, body: unknown): Promise<Response> {
    const cluster = this.#kc.getCurrentCluster();
    if (!cluster) throw new Error("No currently active cluster");
    const url = new URL(cluster.server + path);
    const ctx = new RequestContext(url.toString(), HttpMethod.POST);
    await this.#kc.applySecurityAuthentication(ctx);
    const client = await this.#httpClient();
    return await timedRequest("POST", url, () =>
      fetch(url, {
        method: "POST",
        headers: { ...ctx.getHeaders(), "content-type": "application/json" },
        body: JSON.stringify(body),
        ...(client ? { client } : {}),
      }), httpStatus);
  }

  /** The error for a non-2xx response (its body read for the Status reason). */
  static async statusError(res: Response): Promise<ApiStatusError> {
    let reason: string | undefined, message = res.statusText || `HTTP ${res.status}`;
    try {
      const body = await res.json();
      if (typeof body?.message === "string") message = body.message;
      if (typeof body?.reason === "string") reason = body.reason;
    } catch {
      // Not a Status object: the status line says enough.
    }
    return new ApiStatusError(res.status, message, reason);
  }
}
