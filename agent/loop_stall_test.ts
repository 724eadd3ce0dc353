import assert from "node:assert/strict";
import { Registry } from "../net/prometheus.ts";
import { startStallProbe } from "./loop_stall.ts";

Deno.test("the stall probe reports a blocked event loop", async () => {
  const registry = new Registry();
  const probe = startStallProbe(registry, 10);
  await new Promise((r) => setTimeout(r, 30));
  const until = performance.now() + 120;
  while (performance.now() < until) { /* block the loop */ }
  await new Promise((r) => setTimeout(r, 30));
  probe.stop();
  const text = await registry.metrics();
  const max = Number(/^kube_nft_proxy_event_loop_stall_max_seconds (\S+)$/m.exec(text)![1]);
  assert.ok(max >= 0.09 && max < 1, `max stall ${max}`);
  const over50 = /stall_seconds_bucket\{le="0.05"\} (\d+)/.exec(text)![1];
  const all = /stall_seconds_count (\d+)/.exec(text)![1];
  assert.ok(Number(all) - Number(over50) >= 1, text);
});
