import assert from "node:assert/strict";
import { createSink, formatValue, Logger, type LogSink, stdSink } from "./log.ts";

function capture(): LogSink & { outs: string[]; errs: string[] } {
  const outs: string[] = [];
  const errs: string[] = [];
  return { outs, errs, out: (l) => outs.push(l), err: (l) => errs.push(l) };
}

const fixed = () => new Date(Date.UTC(2026, 10, 23, 0, 27, 14, 123));

Deno.test("text lines follow the klog header layout", () => {
  const sink = capture();
  const log = new Logger({ sink, now: fixed, component: "proxier" });
  log.info("Syncing nftables rules", { ipFamily: "IPv4", count: 3, ok: true });
  assert.equal(sink.outs.length, 1);
  const pid = String(Deno.pid).padStart(7, " ");
  assert.equal(
    sink.outs[0],
    `I1123 00:27:14.123000 ${pid} proxier] "Syncing nftables rules" ipFamily="IPv4" count=3 ok=true`,
  );
  assert.match(sink.outs[0], /^I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ proxier\] "/);
});

Deno.test("verbosity gates info lines, v() returns undefined above it", () => {
  const sink = capture();
  const log = new Logger({ sink, now: fixed, verbosity: 2 });
  log.info("level2", undefined, 2);
  log.info("level3", undefined, 3);
  log.v(2)?.info("v2");
  assert.equal(log.v(3), undefined);
  assert.equal(log.enabled(2), true);
  assert.equal(log.enabled(3), false);
  assert.deepEqual(sink.outs.map((l) => l.split("] ")[1]), ['"level2"', '"v2"']);
});

Deno.test("warnings and errors go to stderr and are never gated", () => {
  const sink = capture();
  const log = new Logger({ sink, now: fixed, verbosity: 0 });
  log.warn("careful", { field: "x" });
  log.error("failed", new Error("boom"), { resource: "services" });
  assert.equal(sink.outs.length, 0);
  assert.equal(sink.errs.length, 2);
  assert.match(sink.errs[0], /^W1123 .*"careful" field="x"$/);
  assert.match(sink.errs[1], /^E1123 .*"failed" err="boom" resource="services"$/);
});

Deno.test("json format carries ts, v, msg and the fields", () => {
  const sink = capture();
  const log = new Logger({ sink, now: fixed, format: "json", verbosity: 4 });
  log.info("hello", { svc: "ns/a", n: 1 }, 4);
  log.error("bad", new Error("e1"));
  const o = JSON.parse(sink.outs[0]);
  assert.equal(o.ts, fixed().getTime());
  assert.equal(o.v, 4);
  assert.equal(o.msg, "hello");
  assert.equal(o.svc, "ns/a");
  assert.equal(o.n, 1);
  const e = JSON.parse(sink.errs[0]);
  assert.equal(e.level, "error");
  assert.equal(e.err, "e1");
});

Deno.test("formatValue renders values the klog way", () => {
  assert.equal(formatValue("a b"), '"a b"');
  assert.equal(formatValue(5), "5");
  assert.equal(formatValue([1, 2]), "[1,2]");
  assert.equal(formatValue({ a: 1 }), '{"a":1}');
  assert.equal(formatValue(new Set(["x"])), '["x"]');
  assert.equal(formatValue(10n), "10");
  assert.equal(formatValue(undefined), "<undefined>");
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.equal(formatValue(cyclic), '"[object Object]"');
});

Deno.test("child loggers keep settings and change the component", () => {
  const sink = capture();
  const log = new Logger({ sink, now: fixed, verbosity: 1 });
  const c = log.child("health");
  c.info("x", undefined, 1);
  assert.match(sink.outs[0], / health\] "x"$/);
});

Deno.test("createSink: stderr by default; klog's --log-file appends there", () => {
  assert.equal(createSink(), stdSink);
  assert.equal(createSink({ splitStream: false }), stdSink);
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/kube-proxy.log`;
    Deno.writeTextFileSync(path, "earlier\n");
    const log = new Logger({ sink: createSink({ file: path }), now: fixed });
    log.info("to the file");
    log.error("also to the file");
    const lines = Deno.readTextFileSync(path).trim().split("\n");
    assert.equal(lines[0], "earlier");
    assert.match(lines[1], /^I.*"to the file"$/);
    assert.match(lines[2], /^E.*"also to the file"$/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
