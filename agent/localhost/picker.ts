/**
 * Endpoint choice for one listener: uniform random, or ClientIP affinity. Every client of a
 * loopback listener has the same source address, so affinity pins all of its connections to
 * one endpoint until the pin has been idle for the timeout (a sliding window, as the kernel's
 * affinity set renews its element on each new connection).
 *
 * @module
 */
import type { Backend } from "./targets.ts";

/** Clock and randomness, injectable for tests. */
export interface PickerDeps {
  /** Milliseconds, monotonic enough for timeouts. */
  now(): number;
  /** In [0, 1). */
  random(): number;
}

/** Picks a backend per connection. */
export class EndpointPicker {
  #backends: Backend[] = [];
  #affinityMs = 0;
  #pinned: Backend | undefined;
  #pinnedAt = 0;
  readonly #deps: PickerDeps;

  /** A picker over `backends` with a ClientIP affinity of `affinitySeconds` (0: none). */
  constructor(backends: Backend[], affinitySeconds: number, deps: PickerDeps) {
    this.#deps = deps;
    this.update(backends, affinitySeconds);
  }

  /** Takes a new backend set; a pin survives while its backend is still in the set. */
  update(backends: Backend[], affinitySeconds: number): void {
    this.#backends = backends;
    const ms = affinitySeconds * 1000;
    if (ms !== this.#affinityMs) this.#pinned = undefined;
    this.#affinityMs = ms;
  }

  /** The backends in use now. */
  get backends(): readonly Backend[] {
    return this.#backends;
  }

  /** The backend for a new connection, or undefined when there is none. */
  pick(): Backend | undefined {
    const list = this.#backends;
    if (list.length === 0) return undefined;
    const now = this.#deps.now();
    const pin = this.#pinned;
    if (this.#affinityMs > 0 && pin && now - this.#pinnedAt <= this.#affinityMs) {
      if (list.some((b) => b.ip === pin.ip && b.port === pin.port)) {
        this.#pinnedAt = now;
        return pin;
      }
    }
    const b = list[Math.floor(this.#deps.random() * list.length) % list.length];
    if (this.#affinityMs > 0) {
      this.#pinned = b;
      this.#pinnedAt = now;
    }
    return b;
  }
}
