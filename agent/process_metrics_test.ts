import assert from "node:assert/strict";
import { Registry } from "../net/prometheus.ts";
import { parseProc, registerProcessMetrics } from "./process_metrics.ts";

const STAT = "4242 (deno (main)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 6 0 12345 " +
  "1073741824 25600 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";

Deno.test("parseProc reads CPU, memory, start time and the fd limit", () => {
  const s = parseProc(
    STAT,
    "cpu 1 2 3\nbtime 1700000000\n",
    "Max open files            1048576              1048576              files\n",
  );
  assert.equal(s.cpuSeconds, 3); // (250 + 50) ticks
  assert.equal(s.virtualBytes, 1073741824);
  assert.equal(s.residentBytes, 25600 * 4096);
  assert.equal(s.startTimeSeconds, 1700000000 + 123.45);
  assert.equal(s.maxFds, 1048576);
  assert.deepEqual(parseProc(undefined, undefined, undefined), {});
});

Deno.test("the process families are scraped from the sample", async () => {
  const registry = new Registry();
  registerProcessMetrics(registry, () => ({
    cpuSeconds: 12.5,
    residentBytes: 100 << 20,
    virtualBytes: 1 << 30,
    startTimeSeconds: 1700000123.5,
    openFds: 17,
    maxFds: 1024,
  }));
  const text = await registry.metrics();
  assert.match(text, /^# TYPE process_cpu_seconds_total counter$/m);
  assert.match(text, /^process_cpu_seconds_total 12.5$/m);
  assert.match(text, /^process_resident_memory_bytes 104857600$/m);
  assert.match(text, /^process_virtual_memory_bytes 1073741824$/m);
  assert.match(text, /^process_start_time_seconds 1700000123.5$/m);
  assert.match(text, /^process_open_fds 17$/m);
  assert.match(text, /^process_max_fds 1024$/m);
  assert.match(text, /^nodejs_heap_size_used_bytes \d+$/m);
  // A second scrape does not add the CPU time twice.
  assert.match(await registry.metrics(), /^process_cpu_seconds_total 12.5$/m);
});

Deno.test("the real /proc/self is readable", async () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const text = await registry.metrics();
  assert.match(text, /^process_resident_memory_bytes [1-9]\d+$/m);
  assert.match(text, /^process_max_fds [1-9]\d*$/m);
});
