/**
 * `--feature-gates` and `featureGates`, read as kube-proxy reads them: the flag is a
 * component-base MapStringBool (`Name=true,Other=false`, pairs accumulate over repeated flags),
 * then the map goes through featuregate's SetFromMap: unknown gates and locked gates set to the
 * other value are errors, `AllAlpha`/`AllBeta` set every alpha/beta gate not set explicitly, and
 * deprecated or GA gates warn. The error and warning texts are upstream's.
 *
 * @module
 */
import { type GateSpec, KNOWN_GATES } from "./gate_table.ts";

const TRUE = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/** Go's strconv.ParseBool, with its error text. */
function parseBool(v: string): boolean {
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new Error(`strconv.ParseBool: parsing ${JSON.stringify(v)}: invalid syntax`);
}

/**
 * Adds the pairs of one `--feature-gates` value to `into` (cliflag.MapStringBool's Set).
 * Throws Error with upstream's text: "malformed pair, expect string=bool" or
 * "invalid value of K: V, err: strconv.ParseBool: ...".
 */
export function parseGatePairs(value: string, into: Record<string, boolean>): void {
  for (const s of value.split(",")) {
    if (s.length === 0) continue;
    const eq = s.indexOf("=");
    if (eq < 0) throw new Error("malformed pair, expect string=bool");
    const k = s.slice(0, eq).trim();
    const v = s.slice(eq + 1).trim();
    try {
      into[k] = parseBool(v);
    } catch (e) {
      throw new Error(`invalid value of ${k}: ${v}, err: ${(e as Error).message}`);
    }
  }
}

/** The outcome of {@link resolveGates}. */
export interface GateResolution {
  /** Every gate set, explicitly or through AllAlpha/AllBeta. */
  enabled: Record<string, boolean>;
  /** Upstream's errors (empty when the map is accepted). */
  errors: string[];
  /** Upstream's warnings for deprecated and GA gates set. */
  warnings: string[];
}

function setUnset(enabled: Record<string, boolean>, stage: GateSpec["stage"], v: boolean): void {
  for (const [name, spec] of KNOWN_GATES) {
    if (name === "AllAlpha" || name === "AllBeta") continue;
    if (spec.stage === stage && !(name in enabled)) enabled[name] = v;
  }
}

/**
 * featuregate's SetFromMap over `m`, in the map's order (Go's is random; the outcome is the
 * same, except which of several errors is reported). An unknown gate stops at once, as upstream.
 */
export function resolveGates(m: Readonly<Record<string, boolean>>): GateResolution {
  const enabled: Record<string, boolean> = {};
  const errors: string[] = [];
  const warnings: string[] = [];
  for (const [k, v] of Object.entries(m)) {
    const spec = KNOWN_GATES.get(k);
    if (!spec) {
      errors.push(`unrecognized feature gate: ${k}`);
      return { enabled, errors, warnings };
    }
    if (spec.locked && spec.default !== v) {
      errors.push(`cannot set feature gate ${k} to ${v}, feature is locked to ${spec.default}`);
      continue;
    }
    if (k === "AllAlpha" || k === "AllBeta") {
      setUnset(enabled, k === "AllAlpha" ? "Alpha" : "Beta", v);
      enabled[k] = v;
      continue;
    }
    enabled[k] = v;
    if (spec.stage === "Deprecated") {
      warnings.push(
        `Setting deprecated feature gate ${k}=${v}. It will be removed in a future release.`,
      );
    } else if (spec.stage === "GA") {
      warnings.push(`Setting GA feature gate ${k}=${v}. It will be removed in a future release.`);
    }
  }
  return { enabled, errors, warnings };
}

/** utilerrors.NewAggregate's message: one error as is, several as "[a, b]". */
export function aggregate(errors: readonly string[]): string {
  return errors.length === 1 ? errors[0] : `[${errors.join(", ")}]`;
}

/** Whether `name` is on, given the gates set (featureEnabled: set value, else the default). */
export function gateEnabled(enabled: Readonly<Record<string, boolean>>, name: string): boolean {
  if (name in enabled) return enabled[name];
  const spec = KNOWN_GATES.get(name);
  if (!spec) throw new Error(`feature "${name}" is not registered in FeatureGate`);
  return spec.default;
}

/** The gates whose value changes what this agent does. */
export interface ProxyGates {
  /** AllowServiceExternalIPs: program Services' externalIPs. */
  allowServiceExternalIPs: boolean;
  /** KubeProxyNFTablesLocalhostNodePorts: the userspace proxy for localhost NodePorts (agent/localhost/). */
  localhostNodePorts: boolean;
  /** ComponentStatusz: serve /statusz on the metrics port. */
  componentStatusz: boolean;
  /** ComponentFlagz: serve /flagz on the metrics port. */
  componentFlagz: boolean;
}

/** The {@link ProxyGates} of a resolved map. */
export function proxyGates(enabled: Readonly<Record<string, boolean>>): ProxyGates {
  return {
    allowServiceExternalIPs: gateEnabled(enabled, "AllowServiceExternalIPs"),
    localhostNodePorts: gateEnabled(enabled, "KubeProxyNFTablesLocalhostNodePorts"),
    componentStatusz: gateEnabled(enabled, "ComponentStatusz"),
    componentFlagz: gateEnabled(enabled, "ComponentFlagz"),
  };
}
