import assert from "node:assert/strict";
import { SyncEngine } from "./engine.ts";
import { Logger } from "./log.ts";
import { MemoryNftables } from "../ffi/nftables/memory/client.ts";
import { ClusterState } from "../proxier/cluster_state.ts";
import { Proxier } from "../proxier/nftables/proxier.ts";
import type { ProxierConfig } from "../proxier/model.ts";

const CFG: ProxierConfig = {
  masqueradeAll: false,
  masqueradeBit: 14,
  localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.0.0/16"] },
  nodePortAddresses: [],
};

Deno.test("events before the initial lists are in do not use up the first sync's rate limit", async () => {
  const nft = new MemoryNftables("ip", "kube-proxy");
  const engine = new SyncEngine({
    state: new ClusterState({ nodeName: "node-a", log: () => {} }),
    proxiers: { 4: new Proxier({ client: nft, config: CFG, log: () => {} }) },
    // As the agent's default --min-sync-period: a burst of two, then one run a second.
    minSyncPeriodMs: 1000,
    syncPeriodMs: 60_000,
    log: new Logger({ verbosity: 0, sink: { out: () => {}, err: () => {} } }),
  });
  engine.recordNode({
    metadata: { name: "node-a", labels: {} },
    status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
  });
  engine.start();
  // Lists streamed page by page: many events, with pauses between them, before both are in.
  for (let i = 0; i < 5; i++) {
    engine.recordService(null, {
      metadata: { namespace: "ns", name: `s${i}`, resourceVersion: "1" },
      spec: { clusterIP: `198.19.0.${i + 1}`, ports: [{ name: "p", protocol: "TCP", port: 80 }] },
    });
    await new Promise((r) => setTimeout(r, 5));
  }
  engine.markSynced("services");
  await new Promise((r) => setTimeout(r, 5));
  const t0 = Date.now();
  engine.markSynced("endpointSlices");
  while (engine.syncs < 1) {
    assert.ok(Date.now() - t0 < 500, "the first sync waited for the rate limit");
    await new Promise((r) => setTimeout(r, 5));
  }
  await engine.stop();
});
