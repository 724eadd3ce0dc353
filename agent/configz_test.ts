import assert from "node:assert/strict";
import { effectiveConfiguration } from "./configz.ts";
import { parseArgs } from "./flags.ts";

Deno.test("configz: the effective configuration in KubeProxyConfiguration's field names", () => {
  const cfg = parseArgs(["--cluster-cidr=198.18.1.0/24", "--min-sync-period=250ms", "--v=2"]);
  const c = effectiveConfiguration(cfg) as Record<string, Record<string, unknown>>;
  assert.equal(c.kind as unknown, "KubeProxyConfiguration");
  assert.equal(c.mode as unknown, "nftables");
  assert.equal(c.clusterCIDR as unknown, "198.18.1.0/24");
  assert.equal(c.nftables.minSyncPeriod, "250ms");
  assert.equal(c.nftables.syncPeriod, "30s");
  assert.equal(c.logging.verbosity, 2);
  assert.equal(c.metricsBindAddress as unknown, "127.0.0.1:10249");
  // JSON-serialisable as served.
  assert.deepEqual(JSON.parse(JSON.stringify(c)), c);
});
