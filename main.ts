/**
 * kube-nft-proxy: a Kubernetes service proxy programming nftables through
 * libnftables, a drop-in for kube-proxy's nftables mode. `trace` and
 * `explain` are its node debugging commands (agent/debug/cli.ts).
 *
 * @module
 */
import { runAgent } from "./agent/app.ts";
import { runDebug } from "./agent/debug/cli.ts";

if (import.meta.main) {
  const [cmd] = Deno.args;
  Deno.exit(
    cmd === "trace" || cmd === "explain" ? await runDebug(Deno.args) : await runAgent(Deno.args),
  );
}
