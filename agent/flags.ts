/**
 * Command-line flags and KubeProxyConfiguration file -> one typed {@link AgentConfig}.
 *
 * The pieces live in ./flags/: the types, value parsers, our flag table, upstream's flags that
 * only warn, the command-line parser, the config file schemas (v1alpha1, v1alpha2) and reader,
 * and the assembly (precedence: defaults < `--config` file < command line).
 * @module
 */
export type {
  AgentConfig,
  BindCIDRs,
  ConntrackConfig,
  DetectLocalMode,
  LoggingFormat,
} from "./flags/types.ts";
export { UsageError } from "./flags/types.ts";
export { normalizeHostPort, splitHostPort } from "./flags/values.ts";
export { FLAGS, type FlagSpec, usage } from "./flags/table.ts";
export { IGNORED_FLAGS } from "./flags/upstream.ts";
export { configFields } from "./flags/config_file.ts";
export { parseArgs } from "./flags/assemble.ts";
export { AGENT_VERSION, KUBE_PROXY_COMPATIBLE, versionText } from "./flags/version.ts";
import { configFields } from "./flags/config_file.ts";

/** The v1alpha1 config-file fields we read (for docs). */
export const CONFIG_FIELDS: readonly string[] = configFields();
