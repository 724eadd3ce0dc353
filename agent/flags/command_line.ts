/**
 * The command line -> {@link Settings}, with pflag's syntax as kube-proxy uses it: `--name=value`,
 * `--name value`, bare booleans, `-v N` / `-vN` / `-v=N`, `-h`, and `_` read as `-` in names.
 * Upstream flags that mean nothing here are consumed with a warning; anything else unknown is a
 * {@link UsageError} with a "did you mean" hint.
 *
 * @module
 */
import { type Settings, UsageError } from "./types.ts";
import { FLAG_BY_NAME, type FlagSpec } from "./table.ts";
import { didYouMean, IGNORED_FLAGS, normalizeFlagName } from "./upstream.ts";
import { parseGatePairs } from "./feature_gates.ts";

/** What the command line said. */
export interface FlagParse {
  /** Values of the flags given. */
  settings: Settings;
  /** --config, if given. */
  configFile?: string;
  /** Accepted upstream flags that have no effect here, deprecated flags used. */
  warnings: string[];
  /** Each flag given, by name, with its last raw value (for /flagz). */
  given: Record<string, string>;
}

const TRUE = new Set(["true", "1", "t", "T", "True", "TRUE"]);
const FALSE = new Set(["false", "0", "f", "F", "False", "FALSE"]);

function convertFlag(f: FlagSpec, raw: string, warnings: string[]): unknown {
  try {
    if (f.kind === "version") {
      // verflag: a boolean that also takes "raw"; "vX.Y.Z" overrides the reported version.
      if (raw === "raw") return "raw";
      if (/^v\d/.test(raw)) {
        warnings.push(`flag --version=${raw} sets the reported version upstream; ignored here`);
        return undefined;
      }
    }
    if (f.kind === "bool" || f.kind === "version") {
      if (TRUE.has(raw)) return true;
      if (FALSE.has(raw)) return false;
      throw new Error(`"${raw}" is not a boolean`);
    }
    return f.convert ? f.convert(raw) : raw;
  } catch (e) {
    const form = f.kind === "bool" ? "--" + f.name + " or --" + f.name + "=true|false" : f.form;
    throw new UsageError(
      `invalid value for --${f.name}: ${(e as Error).message}` + (form ? `; expected ${form}` : ""),
    );
  }
}

function nonEmptyPath(name: string, raw: string): string {
  if (raw === "") throw new UsageError(`--${name} needs a file path, got an empty value`);
  return raw;
}

/** Splits one argument into a flag name and its inline value, or throws for a non-flag. */
function splitArg(arg: string): { name: string; value?: string } {
  let body: string;
  if (arg.startsWith("--")) body = arg.slice(2);
  else if (arg === "-h") body = "help";
  else if (/^-v(=|$|\d)/.test(arg)) {
    // pflag's shorthand: -v, -v=3, -v3.
    const rest = arg.slice(2);
    return { name: "v", value: rest === "" ? undefined : rest.replace(/^=/, "") };
  } else {
    throw new UsageError(
      `unexpected argument "${arg}": flags look like --name=value (see --help)`,
    );
  }
  const eq = body.indexOf("=");
  const name = normalizeFlagName(eq < 0 ? body : body.slice(0, eq));
  return eq < 0 ? { name } : { name, value: body.slice(eq + 1) };
}

/** Parses `argv` (without the program name). Throws {@link UsageError} on bad input. */
export function parseFlags(argv: string[]): FlagParse {
  const settings: Settings = {};
  const warnings: string[] = [];
  const given: Record<string, string> = {};
  let configFile: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    // `deno task start -- --flag` passes the separator through; there are no positionals.
    if (arg === "--") continue;
    const { name, value } = splitArg(arg);
    const f = FLAG_BY_NAME.get(name);
    const ignored = f ? undefined : IGNORED_FLAGS.get(name);
    if (ignored) {
      // Consume its value as upstream's parser would, then say it does nothing here.
      let v = value ?? (ignored.bool ? "true" : "");
      if (value === undefined && !ignored.bool && i + 1 < argv.length) v = argv[++i];
      given[name] = v;
      warnings.push(
        `flag --${name} is accepted for compatibility and has no effect: ${ignored.why}`,
      );
      continue;
    }
    if (!f) {
      const near = didYouMean(name, [...FLAG_BY_NAME.keys(), ...IGNORED_FLAGS.keys()]);
      throw new UsageError(
        `unknown flag --${name}` + (near ? `; did you mean --${near}?` : "") +
          " (see --help for the supported flags)",
      );
    }
    let raw: string;
    if (value !== undefined) raw = value;
    else if (f.kind === "bool" || f.kind === "version") raw = "true";
    else {
      if (i + 1 >= argv.length) {
        throw new UsageError(
          `flag --${name} needs a value: --${name}=<value>` + (f.form ? ` (${f.form})` : ""),
        );
      }
      raw = argv[++i];
    }
    if (f.deprecated) warnings.push(`flag --${name} has been deprecated: ${f.deprecated}`);
    given[name] = raw;
    if (name === "config") {
      configFile = nonEmptyPath("config", raw);
      continue;
    }
    if (name === "feature-gates") {
      // A MapStringBool: repeated flags add up; the gates themselves are checked later, as
      // upstream's Complete does.
      try {
        parseGatePairs(raw, settings.featureGates ??= {});
      } catch (e) {
        throw new UsageError(
          `invalid argument ${JSON.stringify(raw)} for "--feature-gates" flag: ` +
            (e as Error).message,
        );
      }
      continue;
    }
    if (name === "kubeconfig") {
      settings.kubeconfig = nonEmptyPath("kubeconfig", raw);
      continue;
    }
    const v = convertFlag(f, raw, warnings);
    if (f.key && v !== undefined) (settings as Record<string, unknown>)[f.key] = v;
  }
  return { settings, configFile, warnings, given };
}
