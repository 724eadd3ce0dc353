/**
 * The series selectors of the kubernetes-mixin "Kubernetes / Proxy" dashboard and its
 * kube-proxy alert, as literal metric names and label matchers, and a small evaluator of such
 * selectors over a Prometheus text exposition. The `job="kube-proxy"` and `instance=~...`
 * matchers of the mixin are left out: Prometheus adds those target labels at scrape time
 * (docs/monitoring.md shows the scrape config that makes `job` match).
 *
 * @module
 */

/** One selector and whether this agent is expected to serve a series for it. */
export interface MixinSelector {
  /** The dashboard panel or alert using it. */
  panel: string;
  /** `name{label="v",label=~"re"}` */
  selector: string;
  /** Why no series is expected from this agent, when none is. */
  absentBecause?: string;
}

/** The mixin's queries, selector by selector. */
export const MIXIN_SELECTORS: readonly MixinSelector[] = [
  { panel: "Rules Sync Rate", selector: "kubeproxy_sync_proxy_rules_duration_seconds_count" },
  {
    panel: "Rule Sync Latency 99th",
    selector: "kubeproxy_sync_proxy_rules_duration_seconds_bucket",
  },
  {
    panel: "Network Programming Rate",
    selector: "kubeproxy_network_programming_duration_seconds_count",
  },
  {
    panel: "Network Programming Latency 99th",
    selector: "kubeproxy_network_programming_duration_seconds_bucket",
  },
  { panel: "Kube API Request Rate (2xx)", selector: 'rest_client_requests_total{code=~"2.."}' },
  {
    panel: "Kube API Request Rate (3xx)",
    selector: 'rest_client_requests_total{code=~"3.."}',
    absentBecause: "the API server sends no redirects to list and watch requests",
  },
  { panel: "Kube API Request Rate (4xx)", selector: 'rest_client_requests_total{code=~"4.."}' },
  { panel: "Kube API Request Rate (5xx)", selector: 'rest_client_requests_total{code=~"5.."}' },
  {
    panel: "Post Request Latency 99th",
    selector: 'rest_client_request_duration_seconds_bucket{verb="POST"}',
  },
  {
    panel: "Get Request Latency 99th",
    selector: 'rest_client_request_duration_seconds_bucket{verb="GET"}',
  },
  { panel: "Memory", selector: "process_resident_memory_bytes" },
  { panel: "CPU usage", selector: "process_cpu_seconds_total" },
  {
    panel: "Goroutines",
    selector: "go_goroutines",
    absentBecause: "a Go runtime figure; this agent has no goroutines (docs/monitoring.md)",
  },
];

/** A parsed sample line. */
export interface Series {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the sample lines of a text exposition (comments skipped). */
export function parseExposition(text: string): Series[] {
  const out: Series[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The series a selector (`name{l="v", l!="v", l=~"re", l!~"re"}`) matches. */
export function select(series: Series[], selector: string): Series[] {
  const m = selector.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$/);
  if (!m) throw new Error(`not a selector: ${selector}`);
  const matchers = [
    ...(m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"/g),
  ]
    .map(([, label, op, v]) => ({ label, op, v, re: new RegExp(`^(?:${v})$`) }));
  return series.filter((s) =>
    s.name === m[1] &&
    matchers.every(({ label, op, v, re }) => {
      const x = s.labels[label] ?? "";
      return op === "=" ? x === v : op === "!=" ? x !== v : op === "=~" ? re.test(x) : !re.test(x);
    })
  );
}
