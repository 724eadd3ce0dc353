/**
 * Renders a built ruleset as the nft script a full sync would apply, for
 * `--dry-run` output and for loading with `nft -f` in tests.
 *
 * @module
 */
import { renderScript } from "../ffi/nftables/script.ts";
import type { BuiltRuleset } from "./fragment.ts";
import { assemble } from "./assemble.ts";

/** The nft script (one command per line) of a full sync of `built`. */
export function renderDryRun(built: BuiltRuleset): string {
  return renderScript(built.family, built.table, assemble(built).ops);
}
