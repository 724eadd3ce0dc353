/**
 * Reads a KubeProxyConfiguration file (v1alpha1 or v1alpha2, see ./config_fields.ts) into
 * {@link Settings}. Like upstream's defaulting, Go zero values (`""`, `null`, `0s` sync periods,
 * empty v1alpha2 address lists) mean "use the default": kubeadm writes every field that way.
 * Unknown fields and upstream fields with no effect here are warnings, not errors, as upstream's
 * lenient decoding of v1alpha1 is.
 *
 * @module
 */
import { parse as parseYaml } from "yaml";
import { type Settings, UsageError } from "./types.ts";
import { type FieldSpec, SCHEMAS, V1ALPHA1, V1ALPHA1_IPTABLES } from "./config_fields.ts";
import { parseGoDuration } from "../../net/duration.ts";

/** What a config file said. */
export interface ConfigFileParse {
  /** Values of the fields set. */
  settings: Settings;
  /** Its apiVersion. */
  apiVersion: string;
}

function typeName(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "list";
  return typeof v === "object" ? "map" : typeof v;
}

function fieldError(path: string, msg: string): UsageError {
  return new UsageError(`config file: field "${path}": ${msg}`);
}

const WANT: Record<FieldSpec["kind"], string> = {
  string: "a string",
  bool: "true or false",
  int: "an integer",
  duration: `a duration string such as "30s"`,
  stringList: "a list of strings",
  boolMap: "a map of names to true or false",
  object: "a map",
};

function readField(path: string, spec: FieldSpec, v: unknown, out: Settings): void {
  const want = WANT[spec.kind];
  let value: unknown;
  switch (spec.kind) {
    case "string":
    case "duration":
      if (typeof v !== "string") throw fieldError(path, `expected ${want}, got ${typeName(v)}`);
      value = v;
      break;
    case "bool":
      if (typeof v !== "boolean") throw fieldError(path, `expected ${want}, got ${typeName(v)}`);
      value = v;
      break;
    case "int":
      if (typeof v !== "number" || !Number.isInteger(v)) {
        throw fieldError(path, `expected ${want}, got ${typeName(v)} ${JSON.stringify(v)}`);
      }
      value = v;
      break;
    case "boolMap":
      if (
        typeof v !== "object" || v === null || Array.isArray(v) ||
        !Object.values(v).every((x) => typeof x === "boolean")
      ) {
        throw fieldError(path, `expected ${want}, got ${typeName(v)}`);
      }
      value = { ...v };
      break;
    case "stringList":
      if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) {
        throw fieldError(path, `expected ${want}, got ${typeName(v)}`);
      }
      value = v;
      break;
  }
  try {
    if (spec.convert) value = spec.convert(value as string);
    if (spec.convertList) value = spec.convertList(value as string[]);
  } catch (e) {
    throw fieldError(path, (e as Error).message);
  }
  const range = spec.range;
  if (range && typeof value === "number" && (value < range[0] || value > range[1])) {
    throw fieldError(path, `${value} is outside ${range[0]}..${range[1]}`);
  }
  if (spec.key) (out as Record<string, unknown>)[spec.key] = value;
}

/** Go's zero value where it means "the default" (see {@link FieldSpec.zeroIsUnset}). */
function isUnsetValue(spec: FieldSpec, v: unknown): boolean {
  if (v === null || v === "") return true;
  if (!spec.zeroIsUnset) return false;
  if (Array.isArray(v)) return v.length === 0;
  if (v === 0) return true;
  if (spec.kind === "duration" && typeof v === "string") {
    try {
      return parseGoDuration(v) === 0;
    } catch {
      return false;
    }
  }
  return false;
}

/** Reads `obj`'s fields under `prefix` by `fields`; the rest become warnings. */
function walk(
  obj: Record<string, unknown>,
  prefix: string,
  fields: Readonly<Record<string, FieldSpec>>,
  ignored: ReadonlySet<string>,
  out: Settings,
  warnings: string[],
): void {
  for (const [k, v] of Object.entries(obj)) {
    const path = prefix ? `${prefix}.${k}` : k;
    const spec = fields[path];
    if (!spec) {
      const parts = path.split(".");
      const covered = parts.some((_, i) => ignored.has(parts.slice(0, i + 1).join(".")));
      warnings.push(
        covered
          ? `config file: field "${path}" does not apply to kube-nft-proxy; ignored`
          : `config file: unknown field "${path}"; ignored`,
      );
      continue;
    }
    if (spec.kind === "object") {
      if (v === null) continue;
      if (typeof v !== "object" || Array.isArray(v)) {
        throw fieldError(path, `expected a map, got ${typeName(v)}`);
      }
      walk(v as Record<string, unknown>, path, fields, ignored, out, warnings);
      continue;
    }
    if (isUnsetValue(spec, v)) continue;
    readField(path, spec, v, out);
  }
}

/** Parses KubeProxyConfiguration YAML text; unknown fields become warnings. */
export function parseConfigText(text: string, file: string, warnings: string[]): ConfigFileParse {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new UsageError(`config file ${file}: not valid YAML: ${(e as Error).message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new UsageError(`config file ${file}: expected a KubeProxyConfiguration map`);
  }
  const o = doc as Record<string, unknown>;
  if (o.kind !== "KubeProxyConfiguration") {
    throw new UsageError(
      `config file ${file}: kind must be "KubeProxyConfiguration", got ${JSON.stringify(o.kind)}`,
    );
  }
  const schema = SCHEMAS.get(String(o.apiVersion));
  if (!schema) {
    throw new UsageError(
      `config file ${file}: apiVersion must be one of ${[...SCHEMAS.keys()].join(", ")}, got ` +
        JSON.stringify(o.apiVersion),
    );
  }
  const settings: Settings = {};
  const { nftables, iptables, ...rest } = o;
  walk(rest, "", schema.fields, schema.ignored, settings, warnings);
  if (schema === V1ALPHA1 && iptables !== undefined) {
    if (o.mode === undefined || o.mode === "" || o.mode === null) {
      // Upstream runs its default mode, iptables, with these: they are what was tuned. Read
      // them, and let nftables.* (read next) win where both are set.
      walk(
        { iptables },
        "",
        V1ALPHA1_IPTABLES,
        new Set(["iptables.localhostNodePorts"]),
        settings,
        warnings,
      );
    } else walk({ iptables }, "", schema.fields, schema.ignored, settings, warnings);
  } else if (iptables !== undefined) {
    walk({ iptables }, "", schema.fields, schema.ignored, settings, warnings);
  }
  // nftables.* wins over the top-level and iptables.* sync periods: read it last.
  if (nftables !== undefined) {
    walk({ nftables }, "", schema.fields, schema.ignored, settings, warnings);
  }
  if (o.mode === undefined || o.mode === null || o.mode === "") {
    warnings.push(
      `config file: mode is unset, which upstream runs as "iptables"; kube-nft-proxy runs ` +
        `nftables mode (iptables-mode leftovers stay: see docs/migration.md)`,
    );
  }
  return { settings, apiVersion: schema.apiVersion };
}

/** The leaf fields a version reads, for docs and tests. */
export function configFields(apiVersion = V1ALPHA1.apiVersion): string[] {
  const schema = SCHEMAS.get(apiVersion);
  if (!schema) throw new Error(`unknown apiVersion ${apiVersion}`);
  return Object.keys(schema.fields).filter((k) =>
    schema.fields[k].kind !== "object" && k !== "apiVersion" && k !== "kind"
  );
}
