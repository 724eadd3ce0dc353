import assert from "node:assert/strict";
import { Counter, Gauge, Histogram, Registry } from "./prometheus.ts";

Deno.test("prometheus: the text format of counters, gauges and histograms, in registration order", async () => {
  const r = new Registry();
  const c = new Counter({
    name: "a_total",
    help: "A \\ help\nline",
    labelNames: ["code"],
    registers: [r],
  });
  const g = new Gauge({ name: "b", help: "B", registers: [r] });
  const h = new Histogram({
    name: "c_seconds",
    help: "C",
    labelNames: ["ip_family"],
    buckets: [0.5, 0.1],
    registers: [r],
  });
  c.inc({ code: 200 });
  c.inc({ code: "500" }, 2);
  c.inc({ code: 200 });
  g.set(3.5);
  h.observe({ ip_family: "IPv4" }, 0.2);
  h.observe({ ip_family: "IPv4" }, 7);
  assert.equal(
    await r.metrics(),
    [
      "# HELP a_total A \\\\ help\\nline",
      "# TYPE a_total counter",
      'a_total{code="200"} 2',
      'a_total{code="500"} 2',
      "",
      "# HELP b B",
      "# TYPE b gauge",
      "b 3.5",
      "",
      "# HELP c_seconds C",
      "# TYPE c_seconds histogram",
      'c_seconds_bucket{le="0.1",ip_family="IPv4"} 0',
      'c_seconds_bucket{le="0.5",ip_family="IPv4"} 1',
      'c_seconds_bucket{le="+Inf",ip_family="IPv4"} 2',
      'c_seconds_sum{ip_family="IPv4"} 7.2',
      'c_seconds_count{ip_family="IPv4"} 2',
      "",
    ].join("\n"),
  );
  assert.equal(r.contentType, "text/plain; version=0.0.4; charset=utf-8");
});

Deno.test("prometheus: unlabelled metrics start at zero; labelled ones list only their series", async () => {
  const r = new Registry();
  new Counter({ name: "n_total", help: "N", registers: [r] });
  new Gauge({ name: "l", help: "L", labelNames: ["x"], registers: [r] });
  new Histogram({ name: "h", help: "H", buckets: [1], registers: [r] });
  const text = await r.metrics();
  assert.match(text, /^n_total 0$/m);
  assert.doesNotMatch(text, /^l[{ ]/m);
  assert.match(text, /^h_bucket\{le="1"\} 0$/m);
  assert.match(text, /^h_count 0$/m);
});

Deno.test("prometheus: collect hooks run before each scrape; reset and remove drop series", async () => {
  const r = new Registry();
  let n = 0;
  const g = new Gauge({
    name: "cpu",
    help: "C",
    labelNames: ["f"],
    registers: [r],
    async collect() {
      await Promise.resolve();
      this.reset();
      this.set({ f: "a" }, ++n);
    },
  });
  assert.match(await r.metrics(), /^cpu\{f="a"\} 1$/m);
  assert.deepEqual((await g.get()).values, [{ labels: { f: "a" }, value: 2 }]);
  g.set({ f: "b" }, 1);
  g.remove({ f: "b" });
  assert.deepEqual((await r.getSingleMetric("cpu")!.get()).values.map((v) => v.labels.f), ["a"]);
});

Deno.test("prometheus: label values are escaped; bad names, labels and counts are refused", async () => {
  const r = new Registry();
  const c = new Counter({ name: "e_total", help: "E", labelNames: ["v"], registers: [r] });
  c.inc({ v: 'a"b\\c\nd' });
  assert.match(await r.metrics(), /^e_total\{v="a\\"b\\\\c\\nd"\} 1$/m);
  assert.throws(() => c.inc({ w: "x" } as never), /no label "w"/);
  assert.throws(() => c.inc({ v: "x" }, -1), /cannot add -1/);
  assert.throws(
    () => new Counter({ name: "e_total", help: "E", registers: [r] }),
    /already been registered/,
  );
  assert.throws(() => new Gauge({ name: "bad-name", help: "B" }), /invalid metric name/);
  assert.throws(() => new Histogram({ name: "h", help: "H", labelNames: ["le"] }), /invalid label/);
});
