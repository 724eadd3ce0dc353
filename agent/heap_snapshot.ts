/**
 * On SIGUSR2, writes a V8 heap snapshot into $KUBE_NFT_PROXY_HEAP_SNAPSHOT_DIR (when set), for
 * explaining memory on a live node: load it in Chrome DevTools' Memory tab. Writing needs
 * write permission there: run the agent with `--allow-write=<dir>` added for that.
 *
 * @module
 */
import type { Logger } from "./log.ts";

/** Installs the SIGUSR2 handler when the directory is configured; returns an uninstaller. */
export function installHeapSnapshotSignal(log: Logger): () => void {
  const dir = Deno.env.get("KUBE_NFT_PROXY_HEAP_SNAPSHOT_DIR");
  if (!dir) return () => {};
  const onSignal = async () => {
    const path = `${dir}/kube-nft-proxy-${Deno.pid}-${Date.now()}.heapsnapshot`;
    try {
      // Loaded when asked for: node:v8 costs every start ~4 MB of memory.
      const { writeHeapSnapshot } = await import("node:v8");
      writeHeapSnapshot(path);
      log.info("Wrote a heap snapshot", { path });
    } catch (err) {
      log.warn("Cannot write a heap snapshot", { path, err: String(err) });
    }
  };
  Deno.addSignalListener("SIGUSR2", onSignal);
  return () => Deno.removeSignalListener("SIGUSR2", onSignal);
}
