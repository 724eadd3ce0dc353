/**
 * Test support for the informers: wait until every one has delivered its
 * first list. The agent itself never waits: the engine syncs once Services
 * and EndpointSlices have synced.
 *
 * @module
 */
import type { ProxyInformers } from "../informers.ts";

/** Resolves once every informer synced; rejects after `timeoutMs`, naming those that did not. */
export async function waitForSync(inf: ProxyInformers, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!inf.synced()) {
    if (Date.now() > deadline) {
      const missing = inf.supervisors.filter((s) => !s.synced).map((s) => s.name);
      throw new Error(`informers not synced after ${timeoutMs} ms: ${missing.join(", ")}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
