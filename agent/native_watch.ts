/**
 * client-node's Watch over Deno's native fetch.
 *
 * client-node streams watches through undici. On Deno, when the API server
 * goes away mid-stream (a crash, a cut connection), that stream reports
 * nothing: no error, no close, and its inactivity timer never fires, so a
 * watch can stay dead for as long as the watchdog allows. Deno's own fetch
 * surfaces the reset at once, which turns a crash into an ordinary watch
 * error that the supervisor restarts with backoff.
 *
 * Credentials come from the KubeConfig as client-node applies them (headers,
 * CA, client certificate). A cluster with `insecure-skip-tls-verify` over
 * https cannot be expressed with a Deno HTTP client: there the undici watch
 * is kept.
 *
 * @module
 */
import { HttpMethod, type KubeConfig, RequestContext, Watch } from "@kubernetes/client-node";

type Callback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;
type Done = (err: unknown) => void;

interface TlsOptions {
  ca?: string | Uint8Array;
  cert?: string | Uint8Array;
  key?: string | Uint8Array;
  rejectUnauthorized?: boolean;
}

function text(v: string | Uint8Array | undefined): string | undefined {
  return v === undefined ? undefined : typeof v === "string" ? v : new TextDecoder().decode(v);
}

/** A drop-in for client-node's Watch (ListWatch takes it as a constructor argument). */
export class NativeWatch extends Watch {
  readonly #kc: KubeConfig;
  #client: Deno.HttpClient | null | undefined;

  constructor(kc: KubeConfig) {
    super(kc);
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

  /** Same contract as client-node's Watch.watch. */
  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: Callback,
    done: Done,
  ): Promise<AbortController> {
    const cluster = this.#kc.getCurrentCluster();
    if (!cluster) throw new Error("No currently active cluster");
    const server = cluster.server;
    if (server.startsWith("https:") && (await this.#httpClient()) === null) {
      return super.watch(path, queryParams, callback, done);
    }
    const url = new URL(server + path);
    url.searchParams.set("watch", "true");
    for (const [k, v] of Object.entries(queryParams ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    const ctx = new RequestContext(url.toString(), HttpMethod.GET);
    await this.#kc.applySecurityAuthentication(ctx);
    const controller = new AbortController();
    let finished = false;
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      controller.abort();
      done(err);
    };
    try {
      const client = await this.#httpClient();
      const res = await fetch(url, {
        headers: ctx.getHeaders(),
        signal: controller.signal,
        ...(client ? { client } : {}),
      });
      if (res.status !== 200 || res.body === null) {
        await res.body?.cancel();
        const err = new Error(res.statusText || `HTTP ${res.status}`) as Error & {
          statusCode?: number;
        };
        err.statusCode = res.status;
        throw err;
      }
      void this.#pump(res.body, callback).then(() => finish(null), finish);
    } catch (err) {
      finish(err);
    }
    return controller;
  }

  async #pump(body: ReadableStream<Uint8Array>, callback: Callback): Promise<void> {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line === "") continue;
        let data: { type: string; object: unknown };
        try {
          data = JSON.parse(line);
        } catch {
          continue; // as client-node: a garbled line is skipped
        }
        callback(data.type, data.object, data);
      }
    }
  }
}
