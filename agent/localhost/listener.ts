/**
 * One loopback listener of one NodePort: accepts connections and relays each to a backend the
 * picker chooses. Its backends change in place, so established connections are untouched by a
 * Service or endpoint change; closing the listener stops new connections only.
 *
 * @module
 */
import { EndpointPicker, type PickerDeps } from "./picker.ts";
import { relay, type RelayConn } from "./relay.ts";
import type { Backend, ListenerTarget } from "./targets.ts";
import type { LogFn } from "../../net/log.ts";

/** An accepted or dialled connection. */
export type ProxyConn = RelayConn;

/** A bound listener: what Deno.Listener offers that the proxy uses. */
export interface BoundListener {
  /** Waits for the next connection; rejects once the listener is closed. */
  accept(): Promise<ProxyConn>;
  /** Stops listening (connections already accepted stay open). */
  close(): void;
}

/** Binds and dials; the real one is {@link denoNet}, unit tests pass a fake. */
export interface NetOps {
  /** Binds `hostname:port` (throws on EADDRINUSE and the like). */
  listen(hostname: string, port: number): BoundListener;
  /** Connects to a backend. */
  dial(backend: Backend, timeoutMs: number): Promise<ProxyConn>;
}

/** How long a backend connect may take (upstream's dialTimeout). */
export const DIAL_TIMEOUT_MS = 5000;

/** Pause after a failed accept (EMFILE and the like) before the next, so a full fd table does not spin. */
export const ACCEPT_RETRY_MS = 100;

/** Deno's TCP: Deno.listen and Deno.connect, with TCP_NODELAY (small requests are not held back). */
export const denoNet: NetOps = {
  listen: (hostname, port) => Deno.listen({ hostname, port, transport: "tcp" }),
  async dial(backend, timeoutMs) {
    const signal = AbortSignal.timeout(timeoutMs);
    const conn = await Deno.connect({ hostname: backend.ip, port: backend.port, signal });
    conn.setNoDelay(true);
    return conn;
  },
};

/** A running listener. */
export class NodePortListener {
  /** The NodePort this listener holds on the loopback address. */
  readonly nodePort: number;
  /** Chooses the backend of each accepted connection; updated in place when endpoints change. */
  readonly picker: EndpointPicker;
  readonly #ln: BoundListener;
  readonly #net: NetOps;
  readonly #log: LogFn;
  readonly #conns = new Set<ProxyConn>();
  #closed = false;

  /** Starts accepting on `ln` at once; connections go to `target`'s backends, dialled through `net`. */
  constructor(
    ln: BoundListener,
    target: ListenerTarget,
    net: NetOps,
    log: LogFn,
    deps: PickerDeps,
  ) {
    this.#ln = ln;
    this.#net = net;
    this.#log = log;
    this.nodePort = target.nodePort;
    this.picker = new EndpointPicker(target.backends, target.affinitySeconds, deps);
    void this.#acceptLoop();
  }

  /** Connections being relayed now (client side). */
  get connections(): number {
    return this.#conns.size;
  }

  /** Takes the target's new backends and affinity; open connections stay. */
  update(target: ListenerTarget): void {
    this.picker.update(target.backends, target.affinitySeconds);
  }

  /** Stops accepting; with `dropConnections`, also closes every relayed connection. */
  close(dropConnections = false): void {
    if (!this.#closed) {
      this.#closed = true;
      try {
        this.#ln.close();
      } catch {
        // Already closed.
      }
    }
    if (dropConnections) {
      for (const c of this.#conns) {
        try {
          c.close();
        } catch {
          // Already closed.
        }
      }
    }
  }

  async #acceptLoop(): Promise<void> {
    while (!this.#closed) {
      let conn: ProxyConn;
      try {
        conn = await this.#ln.accept();
      } catch (err) {
        if (this.#closed || err instanceof Deno.errors.BadResource) return;
        // Out of file descriptors, most likely: the listener keeps going once some are free.
        this.#log("error", "Accept failed on localhost nodeport proxy; retrying", {
          port: this.nodePort,
          err: String(err),
        });
        await new Promise((r) => setTimeout(r, ACCEPT_RETRY_MS));
        continue;
      }
      void this.#serve(conn);
    }
  }

  async #serve(client: ProxyConn): Promise<void> {
    this.#conns.add(client);
    // Small replies go out at once (the relay writes whole reads, so Nagle only adds delay).
    (client as Partial<Deno.TcpConn>).setNoDelay?.(true);
    try {
      const backend = this.picker.pick();
      if (!backend) return void client.close();
      let upstream: ProxyConn;
      try {
        upstream = await this.#net.dial(backend, DIAL_TIMEOUT_MS);
      } catch (err) {
        this.#log("info", "Failed to connect to backend from localhost nodeport proxy", {
          port: this.nodePort,
          endpoint: `${backend.ip}:${backend.port}`,
          err: String(err),
        });
        return void client.close();
      }
      await relay(client, upstream);
    } catch {
      // relay never throws; a close of an already closed client lands here.
    } finally {
      this.#conns.delete(client);
    }
  }
}
