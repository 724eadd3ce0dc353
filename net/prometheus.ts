/**
 * Prometheus metrics in the text exposition format (0.0.4): counters, gauges and histograms with
 * labels, on registries, with collect hooks run at each scrape. The subset of prom-client's API
 * the agent uses, without prom-client: loading it (and the Node.js compatibility layer it pulls
 * in) cost every start ~0.15-0.2 s and ~20 MB of resident memory.
 *
 * @module
 */

/** Label values by label name. */
export type LabelValues<T extends string> = Partial<Record<T, string | number>>;

/** One series of a metric as {@link Metric.get} reports it (`T`: the metric's label names). */
export interface MetricValue<T extends string> {
  /** Its labels (for a histogram's buckets, `le` too), by name. */
  labels: Record<string, string | number>;
  /** The value. */
  value: number;
  /** The series name when it is not the metric's (`_bucket`, `_sum`, `_count`). */
  metricName?: string;
}

/** What {@link Metric.get} returns. */
export interface MetricSnapshot<T extends string> {
  /** The metric's name. */
  name: string;
  /** Its help text. */
  help: string;
  /** Its type. */
  type: "counter" | "gauge" | "histogram";
  /** Every series. */
  values: MetricValue<T>[];
}

/** A metric's settings. */
export interface MetricConfiguration<T extends string, M> {
  /** The metric's name. */
  name: string;
  /** Its help text. */
  help: string;
  /** Its label names, in the order the text lists them. */
  labelNames?: readonly T[];
  /** Registries to register in (none: not registered). */
  registers?: Registry[];
  /** Runs before each scrape (and {@link Metric.get}) with the metric as `this`. */
  collect?: (this: M) => void | Promise<void>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** A sample value as the text format writes it. */
function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

/** A series' `{a="x",b="y"}` part ("" without labels). */
function labelText(pairs: readonly (readonly [string, string | number])[]): string {
  if (pairs.length === 0) return "";
  return `{${pairs.map(([k, v]) => `${k}="${escapeLabel(String(v))}"`).join(",")}}`;
}

/**
 * Common to every metric type: name, help, labels, one child per label values (`S`: its state),
 * and the collect hook.
 */
export abstract class Metric<T extends string, S> {
  /** The metric's name. */
  readonly name: string;
  /** Its help text. */
  readonly help: string;
  /** Its label names. */
  readonly labelNames: readonly T[];
  /** Its type, as the TYPE line says. */
  abstract readonly type: "counter" | "gauge" | "histogram";
  /** The series by their label values. */
  protected children: Map<string, { labels: LabelValues<T>; state: S }> = new Map();
  readonly #collect: (() => void | Promise<void>) | undefined;

  /** Validates the names and registers the metric in `cfg.registers`. */
  constructor(cfg: MetricConfiguration<T, unknown>) {
    if (!NAME.test(cfg.name)) throw new Error(`invalid metric name "${cfg.name}"`);
    for (const l of cfg.labelNames ?? []) {
      if (!LABEL.test(l) || l === "le") throw new Error(`invalid label name "${l}" of ${cfg.name}`);
    }
    this.name = cfg.name;
    this.help = cfg.help;
    this.labelNames = [...(cfg.labelNames ?? [])];
    this.#collect = cfg.collect?.bind(this);
    for (const r of cfg.registers ?? []) r.registerMetric(this);
  }

  /** A new series' state. */
  protected abstract fresh(): S;

  /** The child for `labels`, created on first use; throws on a label the metric lacks. */
  protected child(labels: LabelValues<T> | undefined): S {
    if (labels !== undefined) {
      for (const k in labels) {
        if (!this.labelNames.includes(k as T)) {
          throw new Error(`metric ${this.name} has no label "${k}"`);
        }
      }
    }
    const key = this.#key(labels);
    let c = this.children.get(key);
    if (c === undefined) {
      const kept: LabelValues<T> = {};
      for (const n of this.labelNames) if (labels?.[n] !== undefined) kept[n] = labels[n];
      c = { labels: kept, state: this.fresh() };
      this.children.set(key, c);
    }
    return c.state;
  }

  /** The label pairs of a child, in label-name order. */
  protected pairs(labels: LabelValues<T>): [string, string | number][] {
    const out: [string, string | number][] = [];
    for (const n of this.labelNames) if (labels[n] !== undefined) out.push([n, labels[n]!]);
    return out;
  }

  /** Forgets every series (an unlabelled metric restarts at zero). */
  reset(): void {
    this.children.clear();
    if (this.labelNames.length === 0) this.child(undefined);
  }

  /** Forgets the series of `labels`. */
  remove(labels: LabelValues<T>): void {
    this.children.delete(this.#key(labels));
  }

  /** The children map's key of `labels`: their values in label-name order. */
  #key(labels: LabelValues<T> | undefined): string {
    let key = "";
    if (labels !== undefined) {
      for (const n of this.labelNames) {
        key += `${labels[n] ?? ""}\u0000`;
      }
    }
    return key;
  }

  /** Runs the collect hook. */
  async collect(): Promise<void> {
    await this.#collect?.();
  }

  /** The series after collecting, as prom-client's `get()` shapes them. */
  async get(): Promise<MetricSnapshot<T>> {
    await this.collect();
    return { name: this.name, help: this.help, type: this.type, values: this.values() };
  }

  /** Every series, as {@link get} reports them. */
  protected abstract values(): MetricValue<T>[];

  /** The metric's text: HELP, TYPE and one line per series (no final newline). */
  text(): string {
    const help = this.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
    const lines = [`# HELP ${this.name} ${help}`, `# TYPE ${this.name} ${this.type}`];
    for (const v of this.values()) {
      const pairs = Object.entries(v.labels) as [string, string | number][];
      lines.push(`${v.metricName ?? this.name}${labelText(pairs)} ${formatValue(v.value)}`);
    }
    return lines.join("\n");
  }
}

/** A metric of one number per series: the common half of {@link Counter} and {@link Gauge}. */
export abstract class ScalarMetric<T extends string> extends Metric<T, { v: number }> {
  /** Unlabelled, its one series starts at 0. */
  constructor(cfg: MetricConfiguration<T, unknown>) {
    super(cfg);
    if (this.labelNames.length === 0) this.child(undefined);
  }

  /** A new series' state. */
  protected fresh(): { v: number } {
    return { v: 0 };
  }

  /** Every series. */
  protected values(): MetricValue<T>[] {
    return [...this.children.values()].map((c) => ({
      labels: Object.fromEntries(this.pairs(c.labels)),
      value: c.state.v,
    }));
  }
}

/** A value that only goes up (until reset). */
export class Counter<T extends string = string> extends ScalarMetric<T> {
  /** The TYPE line's type. */
  readonly type = "counter";

  /** A counter (`collect` runs with it as `this`). */
  constructor(cfg: MetricConfiguration<T, Counter<T>>) {
    super(cfg as MetricConfiguration<T, unknown>);
  }

  /** Adds `value` (default 1) to the series of `labels`. */
  inc(labels?: LabelValues<T> | number, value?: number): void {
    const [l, v] = typeof labels === "number" ? [undefined, labels] : [labels, value ?? 1];
    if (!(v >= 0)) throw new Error(`counter ${this.name}: cannot add ${v}`);
    this.child(l).v += v;
  }
}

/** A value that goes up and down. */
export class Gauge<T extends string = string> extends ScalarMetric<T> {
  /** The TYPE line's type. */
  readonly type = "gauge";

  /** A gauge (`collect` runs with it as `this`). */
  constructor(cfg: MetricConfiguration<T, Gauge<T>>) {
    super(cfg as MetricConfiguration<T, unknown>);
  }

  /** Sets the series of `labels` to `value`. */
  set(labels: LabelValues<T> | number, value?: number): void {
    if (typeof labels === "number") this.child(undefined).v = labels;
    else this.child(labels).v = value!;
  }

  /** Adds `value` (default 1). */
  inc(labels?: LabelValues<T> | number, value?: number): void {
    const [l, v] = typeof labels === "number" ? [undefined, labels] : [labels, value ?? 1];
    this.child(l).v += v;
  }

  /** Subtracts `value` (default 1). */
  dec(labels?: LabelValues<T> | number, value?: number): void {
    const [l, v] = typeof labels === "number" ? [undefined, labels] : [labels, value ?? 1];
    this.child(l).v -= v;
  }
}

/** A histogram's buckets. */
export interface HistogramConfiguration<T extends string>
  extends MetricConfiguration<T, Histogram<T>> {
  /** Upper bounds, ascending (+Inf is added). */
  buckets?: number[];
}

/** prom-client's (and client_golang's) default buckets. */
const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Observations counted into buckets, with their sum and count. */
export class Histogram<T extends string = string>
  extends Metric<T, { counts: number[]; sum: number; count: number }> {
  /** The TYPE line's type. */
  readonly type = "histogram";
  /** Upper bounds, ascending, without +Inf. */
  readonly buckets: readonly number[];

  /** A histogram; unlabelled, its one series starts empty. */
  constructor(cfg: HistogramConfiguration<T>) {
    super(cfg as MetricConfiguration<T, unknown>);
    this.buckets = [...(cfg.buckets ?? DEFAULT_BUCKETS)].sort((a, b) => a - b);
    if (this.labelNames.length === 0) this.child(undefined);
  }

  /** A new series' state. */
  protected fresh(): { counts: number[]; sum: number; count: number } {
    return { counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 };
  }

  /** Counts `value` in the series of `labels`. */
  observe(labels: LabelValues<T> | number, value?: number): void {
    const [l, v] = typeof labels === "number" ? [undefined, labels] : [labels, value!];
    const s = this.child(l);
    const b = this.buckets;
    for (let i = 0; i < b.length; i++) if (v <= b[i]) s.counts[i]++;
    s.sum += v;
    s.count++;
  }

  /** Every series. */
  protected values(): MetricValue<T>[] {
    const out: MetricValue<T>[] = [];
    for (const { labels, state } of this.children.values()) {
      const pairs = Object.fromEntries(this.pairs(labels));
      this.buckets.forEach((le, i) =>
        out.push({
          labels: { le, ...pairs },
          value: state.counts[i],
          metricName: `${this.name}_bucket`,
        })
      );
      out.push({
        labels: { le: "+Inf", ...pairs },
        value: state.count,
        metricName: `${this.name}_bucket`,
      });
      out.push({ labels: pairs, value: state.sum, metricName: `${this.name}_sum` });
      out.push({ labels: pairs, value: state.count, metricName: `${this.name}_count` });
    }
    return out;
  }
}

/** A metric of any type, as a registry holds it. */
// deno-lint-ignore no-explicit-any
export type AnyMetric = Counter<any> | Gauge<any> | Histogram<any>;

/** Metrics by name, in registration order, and their text for /metrics. */
export class Registry {
  readonly #metrics = new Map<string, Metric<string, unknown>>();
  /** The content type of {@link metrics}' text. */
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";

  /** Adds `m`; throws when a metric of that name is already there. */
  registerMetric(m: Metric<string, unknown>): void {
    if (this.#metrics.has(m.name)) {
      throw new Error(`A metric with the name ${m.name} has already been registered.`);
    }
    this.#metrics.set(m.name, m);
  }

  /** The metric named `name`, if registered. */
  getSingleMetric(name: string): AnyMetric | undefined {
    return this.#metrics.get(name) as AnyMetric | undefined;
  }

  /** Removes every metric. */
  clear(): void {
    this.#metrics.clear();
  }

  /** Every metric's text, after running the collect hooks. */
  async metrics(): Promise<string> {
    const parts: string[] = [];
    for (const m of this.#metrics.values()) {
      await m.collect();
      parts.push(m.text());
    }
    // As prom-client and client_golang write it: a blank line between metrics.
    return parts.join("\n\n") + "\n";
  }
}
