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
import { type KubeConfig, Watch } from "@kubernetes/client-node";
import { ApiFetch } from "./api_fetch.ts";

type Callback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;
type Done = (err: unknown) => void;

/** A drop-in for client-node's Watch (ListWatch takes it as a constructor argument). */
export class NativeWatch extends Watch {
  readonly #api: ApiFetch;
  readonly #onGarbled?: (line: string) => void;

  /** `onGarbled` hears of every line that is not JSON (it is skipped, as client-node does). */
  constructor(kc: KubeConfig, onGarbled?: (line: string) => void) {
    super(kc);
    this.#api = new ApiFetch(kc);
    this.#onGarbled = onGarbled;
  }

  /** Same contract as client-node's Watch.watch. */
  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: Callback,
    done: Done,
  ): Promise<AbortController> {
    if (!(await this.#api.usable())) return super.watch(path, queryParams, callback, done);
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
          this.#onGarbled?.(line);
          continue; // as client-node: a garbled line is skipped
        }
        callback(data.type, data.object, data);
      }
    }
  }
}
