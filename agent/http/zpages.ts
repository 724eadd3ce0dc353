/**
 * `/statusz` and `/flagz` on the metrics port, as kube-proxy serves them (component-base
 * zpages, installed by cmd/kube-proxy's serveMetrics behind the ComponentStatusz and
 * ComponentFlagz gates, beta and on by default since 1.36): plain text for humans, with
 * upstream's header and warning, a delimiter picked at random per process so that nobody
 * scrapes it, and 406 unless the request accepts text/plain.
 *
 * @module
 */
import { type AgentConfig, FLAGS } from "../flags.ts";
import { AGENT_RELEASE, KUBE_PROXY_COMPATIBLE } from "../flags/version.ts";

/** The component name the pages carry: upstream's, so that tools reading them still match. */
const COMPONENT = "kube-proxy";

/** zpages' delimiters; one is picked per response (statusz) or per process (flagz). */
export const DELIMITERS = [":", ": ", "=", " "];

const WARNING = "Warning: This endpoint is not meant to be machine parseable, has no formatting " +
  "compatibility guarantees and is for debugging purposes only.";

/** httputil.ErrUnsupportedMediaType's text. */
export const NOT_ACCEPTABLE = "media type not acceptable, must be: text/plain";

/**
 * httputil.AcceptableMediaType: some Accept entry is text/plain, text/*, * /* or *, with no
 * parameter but charset=utf-8 (q aside). No Accept header is not acceptable, as upstream.
 */
export function acceptsPlainText(accept: string | null): boolean {
  for (const part of (accept ?? "").split(",")) {
    const [range, ...params] = part.split(";");
    const sp = range.split("/");
    const type = sp[0].trim();
    let sub: string;
    if (sp.length === 1 && type === "*") sub = "*";
    else if (sp.length >= 2) sub = sp.slice(1).join("/").trim();
    else continue;
    if (!(type === "text" || type === "*") || !(sub === "plain" || sub === "*")) continue;
    const named = new Map<string, string>();
    for (const p of params) {
      const eq = p.indexOf("=");
      if (eq < 0) continue;
      const k = p.slice(0, eq).trim();
      if (k !== "q") named.set(k, p.slice(eq + 1).trim());
    }
    if (named.size === 0) return true;
    if (named.size === 1 && named.get("charset")?.toLowerCase() === "utf-8") return true;
  }
  return false;
}

/** Go's time.UnixDate ("Mon Jan _2 15:04:05 MST 2006"), in UTC. */
export function unixDate(d: Date): string {
  // toUTCString: "Fri, 27 Nov 2026 02:58:13 GMT".
  const [wd, dd, mon, yyyy, hms] = d.toUTCString().split(" ");
  return `${wd.slice(0, 3)} ${mon} ${dd.replace(/^0/, " ")} ${hms} UTC ${yyyy}`;
}

/** statusz's "N hr MM min SS sec". */
export function uptime(ms: number): string {
  const s = Math.floor(ms / 1000);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${Math.floor(s / 3600)} hr ${p(Math.floor(s / 60) % 60)} min ${p(s % 60)} sec`;
}

/** What /statusz reports. */
export interface StatuszInfo {
  /** Process start. */
  started: Date;
  /** Now (for the uptime). */
  now: Date;
  /** The runtime, where upstream names its Go version. */
  runtime: string;
  /** This binary's version. */
  binaryVersion: string;
  /** The kube-proxy release whose behaviour is followed (upstream's emulation version). */
  emulationVersion: string;
}

/** The /statusz body (statusz.go's headerFmt and populateStatuszData). */
export function statuszText(component: string, info: StatuszInfo, delim: string): string {
  return `\n${component} statusz\n${WARNING}\n` +
    `\nStarted${delim} ${unixDate(info.started)}` +
    `\nUp${delim} ${uptime(info.now.getTime() - info.started.getTime())}` +
    `\nRuntime version${delim} ${info.runtime}` +
    `\nBinary version${delim} ${info.binaryVersion}` +
    `\nEmulation version${delim} ${info.emulationVersion}\n\n`;
}

/** The /flagz body (flagz.go's flagzHeaderFmt and printSortedFlags). */
export function flagzText(component: string, flags: Record<string, string>, sep: string): string {
  const lines = Object.keys(flags).sort().map((k) => `${k}${sep}${flags[k]}\n`);
  return `\n${component} flags\n${WARNING}\n\n${lines.join("")}`;
}

/** A zpage's response: the text when the request accepts it, else upstream's 406. */
export function zpageResponse(req: Request, body: () => string): Response {
  if (!acceptsPlainText(req.headers.get("accept"))) {
    return new Response(NOT_ACCEPTABLE + "\n", {
      status: 406,
      headers: {
        "content-type": "text/plain; charset=utf-8",
        "x-content-type-options": "nosniff",
      },
    });
  }
  return new Response(req.method === "HEAD" ? null : body(), {
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}

/**
 * /flagz's values: every flag of the agent with its value (pflag's VisitAll: given on the
 * command line, else the default), plus the upstream flags given that only warn here.
 */
export function flagzValues(cfg: AgentConfig): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of FLAGS) out[f.name] = f.def ?? "";
  Object.assign(out, cfg.flagsGiven);
  // MapStringBool's String(): the pairs, sorted.
  const gates = Object.entries(cfg.featureGates).map(([k, v]) => `${k}=${v}`).sort();
  out["feature-gates"] = gates.join(",");
  return out;
}

/** The metrics port's zpages for `cfg`, behind their gates, as cmd/kube-proxy installs them. */
export function zpagesFor(
  cfg: AgentConfig,
  started: Date = new Date(performance.timeOrigin),
  pick: (n: number) => number = (n) => Math.floor(Math.random() * n),
): { statusz?: () => string; flagz?: () => string } {
  const info = () => ({
    started,
    now: new Date(),
    runtime: `deno ${Deno.version.deno}`,
    binaryVersion: `${AGENT_RELEASE} (kube-nft-proxy)`,
    emulationVersion: KUBE_PROXY_COMPATIBLE.slice(1),
  });
  // flagz renders once per process (a sync.Once), statusz per request.
  const flagSep = DELIMITERS[pick(DELIMITERS.length)];
  let flagz: string | undefined;
  return {
    statusz: cfg.gates.componentStatusz
      ? () => statuszText(COMPONENT, info(), DELIMITERS[pick(DELIMITERS.length)])
      : undefined,
    flagz: cfg.gates.componentFlagz
      ? () => flagz ??= flagzText(COMPONENT, flagzValues(cfg), flagSep)
      : undefined,
  };
}
