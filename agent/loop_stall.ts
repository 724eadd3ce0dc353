/**
 * An event-loop stall probe: a timer that should fire every `intervalMs`, and
 * how late each firing is. A late timer means the loop was busy (a long sync,
 * a garbage collection, a synchronous FFI call). Exported as
 * `kube_nft_proxy_event_loop_stall_seconds` (a histogram of the lateness of
 * every tick) and `kube_nft_proxy_event_loop_stall_max_seconds` (the worst
 * since start), so the idle benchmark can tell whether any stall passed 50 ms.
 *
 * @module
 */
import { Gauge, Histogram, type Registry } from "../net/prometheus.ts";

/** Lateness buckets (s): the idle target is "no stall over 50 ms". */
const STALL_BUCKETS: readonly number[] = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
];

/** A running probe. */
export interface StallProbe {
  /** Stops the probe. */
  stop(): void;
}

/**
 * Starts the probe; its timer does not keep the process alive.
 * `now` is a monotonic clock in ms (tests pass their own).
 */
export function startStallProbe(
  registry: Registry,
  intervalMs = 100,
  now: () => number = () => performance.now(),
): StallProbe {
  const hist = new Histogram({
    name: "kube_nft_proxy_event_loop_stall_seconds",
    help: "How late the event loop ran a timer due every 100 ms (ours): the loop was busy",
    buckets: [...STALL_BUCKETS],
    registers: [registry],
  });
  const max = new Gauge({
    name: "kube_nft_proxy_event_loop_stall_max_seconds",
    help: "The longest event-loop stall since start (ours)",
    registers: [registry],
  });
  let worst = 0;
  let due = now() + intervalMs;
  const timer = setInterval(() => {
    const t = now();
    const late = Math.max(0, t - due) / 1000;
    due = t + intervalMs;
    hist.observe(late);
    if (late > worst) max.set(worst = late);
  }, intervalMs);
  Deno.unrefTimer(timer);
  return { stop: () => clearInterval(timer) };
}
