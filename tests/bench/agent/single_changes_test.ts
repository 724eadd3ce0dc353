import assert from "node:assert/strict";
import { waitQuiet } from "./single_changes.ts";

Deno.test("waitQuiet: an idle process is quiet after one window", async () => {
  const ms = await waitQuiet(Deno.pid, { share: 0.5, windowMs: 300, timeoutMs: 5000 });
  assert(ms >= 300 && ms < 5000, `waited ${ms} ms`);
});

Deno.test("waitQuiet: a process never under the share waits until the timeout", async () => {
  const ms = await waitQuiet(Deno.pid, { share: 0, windowMs: 200, timeoutMs: 600 });
  assert(ms >= 600, `waited ${ms} ms`);
});
