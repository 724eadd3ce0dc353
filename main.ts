/**
 * kube-nft-proxy: a Kubernetes service proxy programming nftables through
 * libnftables, a drop-in for kube-proxy's nftables mode.
 *
 * @module
 */
import { runAgent } from "./agent/app.ts";

if (import.meta.main) {
  Deno.exit(await runAgent(Deno.args));
}
