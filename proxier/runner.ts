/**
 * A bounded-frequency runner, as kube-proxy's: `fn` runs at most about once
 * per `minInterval` (a token bucket allows a `burst` of back-to-back runs), at
 * least once per `maxInterval`, never twice at once; a failing run is retried
 * with exponential backoff. Uses setTimeout/Date only, so it can be driven by
 * fake timers in tests.
 *
 * @module
 */

/** Runner settings, all in milliseconds. */
export interface RunnerOptions {
  /** Minimum time between runs once the burst is used up (kube-proxy --min-sync-period). */
  minInterval: number;
  /** Maximum time between runs (kube-proxy --sync-period). */
  maxInterval: number;
  /** Runs allowed back to back before minInterval applies (default 2). */
  burst?: number;
  /** First retry delay after a failure (default max(minInterval, 1000)); doubles up to maxInterval. */
  retryInterval?: number;
  /** Called with every failure of `fn` (the caller typically forces the next sync full). */
  onError?: (err: unknown, consecutiveFailures: number) => void;
}

/** Runs a function with bounded frequency. Call {@link start} then {@link run} to request runs. */
export class BoundedFrequencyRunner {
  readonly #minInterval: number;
  readonly #maxInterval: number;
  readonly #burst: number;
  readonly #retryInterval: number;
  #tokens: number;
  #lastRefill = Date.now();
  #running = false;
  #pending = false;
  #started = false;
  #stopped = false;
  #failures = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Infinity;
  /** Bumped whenever the pending tick is replaced or cancelled (a microtask cannot be cleared). */
  #armed = 0;
  /** The one delayed request (runAfter), and when it is due. */
  #deferred: ReturnType<typeof setTimeout> | undefined;
  #deferredAt = Infinity;
  #current: Promise<void> = Promise.resolve();
  readonly #fn: () => Promise<void>;
  readonly #opts: RunnerOptions;

  /**
   * A runner of `fn`, idle until the first {@link run}.
   * @param fn the work; a rejected promise counts as a failure.
   * @param opts intervals; minInterval 0 means no rate limit.
   */
  constructor(fn: () => Promise<void>, opts: RunnerOptions) {
    this.#fn = fn;
    this.#opts = opts;
    if (!(opts.minInterval >= 0) || !(opts.maxInterval > 0)) {
      throw new RangeError(
        `BoundedFrequencyRunner: minInterval must be >= 0 and maxInterval > 0 (got ${opts.minInterval}, ${opts.maxInterval})`,
      );
    }
    if (opts.minInterval > opts.maxInterval) {
      throw new RangeError(
        `BoundedFrequencyRunner: minInterval (${opts.minInterval} ms) exceeds maxInterval (${opts.maxInterval} ms)`,
      );
    }
    this.#minInterval = opts.minInterval;
    this.#maxInterval = opts.maxInterval;
    this.#burst = Math.max(1, opts.burst ?? 2);
    this.#retryInterval = opts.retryInterval ?? Math.max(opts.minInterval, 1000);
    this.#tokens = this.#burst;
  }

  /** Starts the loop: runs once now, then at least every maxInterval. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    this.run();
  }

  /** Requests a run as soon as the rate limit allows. */
  run(): void {
    if (this.#stopped) return;
    this.#pending = true;
    if (this.#started && !this.#running) this.#schedule(this.#waitForToken(), true);
  }

  /**
   * Requests a run no earlier than `ms` from now (e.g. a delayed chain deletion). One delayed
   * request is kept, the earliest: a run at that time asks again for whatever is still due
   * later, so every sync may ask without piling up timers (each would be a run of its own).
   */
  runAfter(ms: number): void {
    if (this.#stopped) return;
    const at = Date.now() + Math.max(0, ms);
    if (this.#deferred !== undefined && this.#deferredAt <= at) return;
    clearTimeout(this.#deferred);
    this.#deferredAt = at;
    this.#deferred = setTimeout(() => {
      this.#deferred = undefined;
      this.#deferredAt = Infinity;
      this.run();
    }, at - Date.now());
  }

  /** Stops scheduling and waits for a run in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#armed++;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    clearTimeout(this.#deferred);
    this.#deferred = undefined;
    this.#timer = undefined;
    await this.#current;
  }

  /** Consecutive failures so far (0 after a success). */
  get consecutiveFailures(): number {
    return this.#failures;
  }

  /** Adds the tokens earned since the last refill (one per minInterval, up to the burst). */
  #refill(): void {
    if (this.#minInterval === 0) {
      this.#tokens = this.#burst;
      return;
    }
    const now = Date.now();
    const gained = (now - this.#lastRefill) / this.#minInterval;
    this.#tokens = Math.min(this.#burst, this.#tokens + gained);
    this.#lastRefill = now;
  }

  /** Milliseconds until a token is free (0 when one is). */
  #waitForToken(): number {
    this.#refill();
    if (this.#tokens >= 1) return 0;
    return Math.ceil((1 - this.#tokens) * this.#minInterval);
  }

  /**
   * Arms the timer to tick in `ms`, unless it is set to fire sooner already. A request from
   * outside a run (`immediate`) with no wait ticks in a microtask: a zero timer costs 1-4 ms
   * here (timer granularity and nesting clamps), which a change would wait out on its way to
   * the kernel. Events delivered together still share one run: the microtask runs only once the
   * code that requested it has returned. After a run the loop goes through a timer, so that it
   * always yields to the event loop.
   */
  #schedule(ms: number, immediate = false): void {
    if (this.#stopped) return;
    const at = Date.now() + Math.max(0, ms);
    if (this.#timerAt <= at) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = at;
    const seq = ++this.#armed;
    const fire = () => {
      if (seq !== this.#armed) return; // re-armed or stopped since
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#tick();
    };
    if (ms <= 0 && immediate) queueMicrotask(fire);
    else this.#timer = setTimeout(fire, ms);
  }

  /** The timer fired: run now if a token is free, else wait for one. */
  #tick(): void {
    if (this.#stopped || this.#running) return;
    // A timer firing with nothing pending is the periodic (maxInterval) run.
    this.#pending = true;
    const wait = this.#waitForToken();
    if (wait > 0) {
      this.#schedule(wait);
      return;
    }
    this.#tokens -= 1;
    this.#pending = false;
    this.#running = true;
    this.#current = this.#execute();
  }

  /** Runs `fn` once; then schedules the retry (backoff), the pending run, or the periodic one. */
  async #execute(): Promise<void> {
    let failed = false;
    try {
      await this.#fn();
      this.#failures = 0;
    } catch (err) {
      failed = true;
      this.#failures++;
      try {
        this.#opts.onError?.(err, this.#failures);
      } catch {
        // A throwing error handler must not kill the loop.
      }
    } finally {
      this.#running = false;
    }
    if (this.#stopped) return;
    if (failed) {
      const backoff = Math.min(this.#retryInterval * 2 ** (this.#failures - 1), this.#maxInterval);
      this.#schedule(Math.max(backoff, this.#waitForToken()));
    } else if (this.#pending) {
      this.#schedule(this.#waitForToken());
    } else {
      this.#schedule(this.#maxInterval);
    }
  }
}
