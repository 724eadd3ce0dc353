/**
 * The log callback the core takes (trackers, ClusterState, the Proxier), so that it logs
 * without importing the agent's logger: the agent plugs its own in.
 *
 * @module
 */

/** Severity of a {@link LogFn} line. */
export type LogLevel = "info" | "warn" | "error";

/** A log sink: a level, a message and structured fields. */
export type LogFn = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => void;

/** Default sink: one line on stderr. */
export const consoleLog: LogFn = (level, msg, fields) => {
  console.error(fields ? `${level}: ${msg} ${JSON.stringify(fields)}` : `${level}: ${msg}`);
};
