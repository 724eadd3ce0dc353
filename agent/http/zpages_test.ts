import assert from "node:assert/strict";
import { parseArgs } from "../flags.ts";
import { createMetrics, metricsHandler } from "../metrics.ts";
import {
  acceptsPlainText,
  DELIMITERS,
  flagzText,
  flagzValues,
  NOT_ACCEPTABLE,
  statuszText,
  unixDate,
  uptime,
  zpagesFor,
} from "./zpages.ts";

const WARNING = "Warning: This endpoint is not meant to be machine parseable, has no formatting " +
  "compatibility guarantees and is for debugging purposes only.";

Deno.test("zpages accept text/plain as component-base's httputil does", () => {
  for (const ok of ["text/plain", "*/*", "text/*", "*", "text/plain; charset=UTF-8", "a/b, */*"]) {
    assert.ok(acceptsPlainText(ok), ok);
  }
  for (const no of [null, "", "application/json", "text/html", "text/plain; v=1", "text"]) {
    assert.ok(!acceptsPlainText(no), String(no));
  }
  assert.ok(acceptsPlainText("text/plain;q=0.5"), "q is not a parameter that refuses");
});

Deno.test("statusz and flagz text: upstream's header, warning and layout", () => {
  const started = new Date(Date.UTC(2026, 10, 7, 2, 3, 4));
  assert.equal(unixDate(started), "Sat Nov  7 02:03:04 UTC 2026");
  assert.equal(uptime(3_725_000), "1 hr 02 min 05 sec");
  const now = new Date(started.getTime() + 16_000);
  const info = {
    started,
    now,
    runtime: "deno 2.0.0",
    binaryVersion: "v0.1.0",
    emulationVersion: "1.38",
  };
  assert.equal(
    statuszText("kube-proxy", info, ": "),
    `\nkube-proxy statusz\n${WARNING}\n\nStarted:  Sat Nov  7 02:03:04 UTC 2026\n` +
      "Up:  0 hr 00 min 16 sec\nRuntime version:  deno 2.0.0\nBinary version:  v0.1.0\n" +
      "Emulation version:  1.38\n\n",
  );
  assert.equal(
    flagzText("kube-proxy", { v: "2", b: "x" }, "="),
    `\nkube-proxy flags\n${WARNING}\n\nb=x\nv=2\n`,
  );
});

Deno.test("flagz lists every flag, given or default, and the gates as MapStringBool prints them", () => {
  const cfg = parseArgs([
    "--v=3",
    "--feature-gates=ComponentStatusz=false,AllowServiceExternalIPs=false",
    "--oom-score-adj=-998",
  ]);
  const f = flagzValues(cfg);
  assert.equal(f.v, "3");
  assert.equal(f["iptables-sync-period"], "30s");
  assert.equal(f["oom-score-adj"], "-998");
  assert.equal(f["feature-gates"], "AllowServiceExternalIPs=false,ComponentStatusz=false");
});

Deno.test("the metrics port serves /statusz and /flagz behind their gates", async () => {
  const m = createMetrics();
  const get = async (cfgArgs: string[], path: string, accept: string | null = "*/*") => {
    const headers = accept === null ? undefined : { accept };
    const res = await metricsHandler(
      new Request(`http://x${path}`, { headers }),
      m.registry,
      zpagesFor(parseArgs(cfgArgs), new Date(0), () => 0),
    );
    return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
  };
  const s = await get([], "/statusz");
  assert.equal(s.status, 200);
  assert.equal(s.type, "text/plain; charset=utf-8");
  assert.match(s.text, /^\nkube-proxy statusz\nWarning: /);
  assert.ok(s.text.includes("\nStarted: Thu Jan  1 00:00:00 UTC 1970\n"), s.text);
  assert.match(s.text, /\nEmulation version: 1\.38\n/);
  const fz = await get(["--v=4"], "/flagz");
  assert.equal(fz.status, 200);
  assert.match(fz.text, /\nv:4\n/);
  // Off by gate: not served at all (upstream does not install the handler).
  assert.equal((await get(["--feature-gates=ComponentStatusz=false"], "/statusz")).status, 404);
  assert.equal((await get(["--feature-gates=AllBeta=false"], "/flagz")).status, 404);
  // No acceptable media type: 406 with upstream's text.
  const bad = await get([], "/statusz", "application/json");
  assert.equal(bad.status, 406);
  assert.equal(bad.text, NOT_ACCEPTABLE + "\n");
  assert.equal((await get([], "/flagz", null)).status, 406);
});

Deno.test("flagz is rendered once per process, statusz per request", () => {
  let n = 0;
  const pages = zpagesFor(parseArgs([]), new Date(0), (k) => n++ % k);
  assert.equal(pages.flagz!(), pages.flagz!());
  const seps = new Set([pages.statusz!(), pages.statusz!()].map((t) => t.match(/\nUp(.*?)\d/)![1]));
  assert.equal(seps.size, 2);
  assert.ok([...seps].every((d) => DELIMITERS.some((x) => `${x} ` === d)));
});
