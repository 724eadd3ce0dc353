/**
 * The API server's resourceVersion going back: after etcd is restored from a backup, the server
 * answers with versions older than those it sent before. A list (or watch) asking for a version
 * it has not reached is answered 504 "Too large resource version" by the watch cache, as
 * client-go's reflector recognises (isTooLargeResourceVersionError) and answers with a fresh
 * list; and the versions the agent sees run backwards, which it reports.
 *
 * @module
 */
import { errText, statusOf } from "./api_probe.ts";

/** True for the server's answer to a version it has not reached (504, "Too large resource version"). */
export function tooLargeResourceVersion(err: unknown): boolean {
  return statusOf(err) === 504 && /too large resource version/i.test(errText(err));
}

/** The warning when the versions seen run backwards. */
export const WENT_BACK =
  "The API server's resourceVersion went back (restored from a backup?); following its state";

/** Remembers the last resourceVersion seen, to notice one going back. */
export class VersionTrail {
  #last = 0;

  /**
   * A trail that has seen nothing yet.
   * @param report called with what went back (the agent follows the server: it is the truth).
   */
  constructor(readonly report: (fields: Record<string, unknown>) => void) {}

  /**
   * Records `rv` (seen in `where`); reports it when it is older than the one before and returns
   * the one before, else undefined. Versions are opaque to clients: only numbers are compared.
   */
  note(rv: string, where: string): number | undefined {
    if (!/^\d{1,15}$/.test(rv)) return undefined;
    const n = Number(rv), before = this.#last;
    this.#last = n;
    if (n >= before) return undefined;
    this.report({ in: where, resourceVersion: rv, previously: before });
    return before;
  }
}
