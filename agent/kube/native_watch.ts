/**
 * Watches over Deno's native fetch, with client-node's Watch contract.
 *
 * client-node streams watches through undici. On Deno, when the API server
 * goes away mid-stream (a crash, a cut connection), that stream reports
 * nothing: no error, no close, and its inactivity timer never fires, so a
 * watch can stay dead for as long as the watchdog allows. Deno's own fetch
 * surfaces the reset at once, which turns a crash into an ordinary watch
 * error that the supervisor restarts with backoff.
 *
 * Credentials come from the {@link ApiFetch}. A cluster with
 * `insecure-skip-tls-verify` over https cannot be expressed with a Deno HTTP
 * client: there client-node's undici watch is kept, loaded only then.
 *
 * @module
 */
import { ApiFetch } from "./api_fetch.ts";

/** Receives each watch event: its phase, the object, and the raw event. */
export type Callback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;
/** Called once when the watch ends, with why. */
export type Done = (err: unknown) => void;

/** One watch request at a time, as client-node's Watch (ListWatch-compatible contract). */
export class NativeWatch {
  readonly #api: ApiFetch;
  readonly #onGarbled?: (line: string) => void;

  /** `onGarbled` hears of every line that is not JSON (it is skipped, as client-node does). */
  constructor(api: ApiFetch, onGarbled?: (line: string) => void) {
    this.#api = api;
    this.#onGarbled = onGarbled;
  }

  /** Same contract as client-node's Watch.watch. */
  async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: Callback,
    done: Done,
  ): Promise<AbortController> {
    if (!(await this.#api.usable())) {
      const fallback = await import("./client_node_fallback.ts");
      const kc = await this.#api.credentials.clientNodeConfig();
      return await fallback.watch(kc, path, queryParams, callback, done);
    }
    const controller = new AbortController();
    let finished = false;
    const finish = (err: unknown) => {
      if (finished) return;
      finished = true;
      controller.abort();
      done(err);
    };
    try {
      const res = await this.#api.get(path, { ...queryParams, watch: true }, controller.signal);
      if (res.status !== 200 || res.body === null) throw await ApiFetch.statusError(res);
      void this.#pump(res.body, callback).then(() => finish(null), finish);
    } catch (err) {
      finish(err);
    }
    return controller;
  }

  // A plain reader and one decoder: piping through a TextDecoderStream costs a transform's
  // promises per chunk, and under churn the watch is most of the agent's work.
  async #pump(body: ReadableStream<Uint8Array>, callback: Callback): Promise<void> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let start = 0, nl: number;
      while ((nl = buf.indexOf("\n", start)) >= 0) {
        const line = buf.slice(start, nl).trim();
        start = nl + 1;
        if (line === "") continue;
        let data: { type: string; object: unknown };
        try {
          data = JSON.parse(line);
        } catch {
          this.#onGarbled?.(line);
          continue; // as client-node: a garbled line is skipped
        }
        callback(data.type, data.object, data);
      }
      if (start > 0) buf = buf.slice(start);
    }
  }
}
