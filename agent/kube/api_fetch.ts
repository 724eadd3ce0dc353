/**
 * Requests to the API server over Deno's native fetch, with the credentials
 * of a {@link KubeCredentials} (headers, CA, client certificate). Lists and
 * watches go through here: client-node's typed clients deserialize every
 * object into classes (and its watch misses a crashed server on Deno), which
 * at 30k Services costs seconds.
 *
 * A cluster with `insecure-skip-tls-verify` over https cannot be expressed
 * with a Deno HTTP client: {@link ApiFetch.usable} says so, and callers go
 * through agent/kube/client_node_fallback.ts there.
 *
 * @module
 */
import type { KubeCredentials } from "./kube_credentials.ts";
import { httpStatus, timedRequest } from "./rest_metrics.ts";

/** Query parameters (undefined ones are left out). */
export type Query = Record<string, string | number | boolean | undefined>;

/** An HTTP error status from the API server. */
export class ApiStatusError extends Error {
  /** An API answer with its HTTP status, message and Status reason. */
  constructor(readonly statusCode: number, message: string, readonly reason?: string) {
    super(message);
    this.name = "ApiStatusError";
  }
}

/** Native-fetch requests against the credentials' API server. */
export class ApiFetch {
  /** The credentials requests go out with. */
  readonly credentials: KubeCredentials;

  /** A connection with these credentials. */
  constructor(credentials: KubeCredentials) {
    this.credentials = credentials;
  }

  /** The API server base URL. */
  get server(): string {
    return this.credentials.server;
  }

  /** False for an https cluster whose certificate must not be verified (native fetch cannot). */
  usable(): Promise<boolean> {
    return Promise.resolve(this.credentials.nativeFetch);
  }

  /** GET `path` with `query`; resolves with the response (any status). */
  async get(path: string, query: Query, signal?: AbortSignal): Promise<Response> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    const headers = await this.credentials.headers();
    const client = await this.credentials.httpClient();
    return await timedRequest("GET", url, () =>
      fetch(url, {
        headers,
        ...(signal ? { signal } : {}),
        ...(client ? { client } : {}),
      }), httpStatus);
  }

  /** POST `body` as JSON to `path`; resolves with the response (any status). */
  async post(path: string, body: unknown): Promise<Response> {
    const url = new URL(this.server + path);
    const headers = await this.credentials.headers();
    const client = await this.credentials.httpClient();
    return await timedRequest("POST", url, () =>
      fetch(url, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
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
