/**
 * kube-nft-proxy: a Kubernetes service proxy programming nftables through
 * libnftables, a drop-in for kube-proxy's nftables mode. `trace` and
 * `explain` are its node debugging commands (agent/debug/cli.ts).
 *
 * @module
 */
import { runAgent } from "./agent/app.ts";
import { runDebug } from "./agent/debug/cli.ts";
import { isReconcileWorkerThread } from "./conntrack/worker.ts";

// The conntrack Worker is started from its module's URL, which in the bundled artefact is this
// whole program: on that thread the module serves requests and the agent must not start again.
if (import.meta.main && !isReconcileWorkerThread()) {
  const [cmd] = Deno.args;
  Deno.exit(
    cmd === "trace" || cmd === "explain" ? await runDebug(Deno.args) : await runAgent(Deno.args),
  );
}
