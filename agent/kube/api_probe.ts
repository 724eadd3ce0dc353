/**
 * The API server reachability probe: a crashed server's watches die without an error on this
 * runtime, so the informers also GET /version every few seconds, and once the server has been
 * unreachable and answers again, every watch is restarted at once instead of waiting for the
 * watchdog.
 *
 * @module
 */
import type { ApiFetch } from "./api_fetch.ts";
import type { Logger } from "../log.ts";
import { httpStatus, timedRequest } from "./rest_metrics.ts";

/** The HTTP status an error carries, if any. */
export function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | undefined;
  if (typeof e?.statusCode === "number") return e.statusCode;
  if (typeof e?.code === "number") return e.code;
  return undefined;
}

/** One line for a failed request: "HTTP 503: message" or the message. */
export function errText(err: unknown): string {
  const code = statusOf(err);
  const msg = err instanceof Error ? err.message.split("\n")[0] : String(err);
  return code ? `HTTP ${code}: ${msg}` : msg;
}

/**
 * GET /version. Any HTTP answer, even an error status, shows the server is reachable: only a
 * request that gets no response fails.
 */
export async function reachable(api: ApiFetch): Promise<void> {
  if (await api.usable()) {
    const res = await api.get("/version", {});
    await res.body?.cancel();
    return;
  }
  // Only where Deno's fetch cannot reach the server: client-node, loaded now.
  const { getVersion } = await import("./client_node_fallback.ts");
  const kc = await api.credentials.clientNodeConfig();
  try {
    await timedRequest("GET", api.server + "/version", () => getVersion(kc), httpStatus);
  } catch (e) {
    if (httpStatus(e) === undefined) throw e;
  }
}

/**
 * Calls `check` every `intervalMs` (bounded by a timeout). When a check
 * succeeds after one or more failed, the server was away: `recovered` runs.
 */
export class ApiProbe {
  #timer: ReturnType<typeof setTimeout> | undefined;
  #down = false;
  #stopped = false;

  /** Probes with `check` every `intervalMs` (each try times out after `timeoutMs`); runs `recovered` when the server answers again after failing. */
  constructor(
    check: () => Promise<void>,
    recovered: (reason: string) => void,
    intervalMs: number,
    log?: Logger,
    timeoutMs: number = Math.max(1000, Math.min(intervalMs, 5000)),
  ) {
    this.#check = check;
    this.#recovered = recovered;
    this.#intervalMs = intervalMs;
    this.#log = log;
    this.#timeoutMs = timeoutMs;
  }

  readonly #check: () => Promise<void>;
  readonly #recovered: (reason: string) => void;
  readonly #intervalMs: number;
  readonly #log: Logger | undefined;
  readonly #timeoutMs: number;

  /** Starts probing (no-op when the interval is 0). */
  start(): void {
    if (this.#intervalMs > 0) this.#schedule();
  }

  /** Stops probing. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** Runs one probe now; exposed for tests. */
  async probe(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, rej) => {
      timer = setTimeout(
        () => rej(new Error(`no answer in ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
    });
    try {
      await Promise.race([this.#check(), timeout]);
      if (this.#down) {
        this.#down = false;
        this.#log?.info("API server reachable again; restarting watches");
        this.#recovered("API server was unreachable");
      }
    } catch (err) {
      if (!this.#down) {
        this.#log?.warn("API server unreachable", { err: errText(err) });
      }
      this.#down = true;
    } finally {
      clearTimeout(timer);
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(async () => {
      await this.probe();
      this.#schedule();
    }, this.#intervalMs);
  }
}
