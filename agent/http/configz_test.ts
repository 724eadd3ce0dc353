import assert from "node:assert/strict";
import { configzBody, effectiveConfiguration } from "./configz.ts";
import { parseArgs } from "../flags.ts";

Deno.test("--write-config-to shape: a v1alpha1 KubeProxyConfiguration", () => {
  const cfg = parseArgs(["--cluster-cidr=198.18.1.0/24", "--min-sync-period=250ms", "--v=2"]);
  const c = effectiveConfiguration(cfg) as Record<string, Record<string, unknown>>;
  assert.equal(c.kind as unknown, "KubeProxyConfiguration");
  assert.equal(c.apiVersion as unknown, "kubeproxy.config.k8s.io/v1alpha1");
  assert.equal(c.mode as unknown, "nftables");
  assert.equal(c.clusterCIDR as unknown, "198.18.1.0/24");
  assert.equal(c.nftables.minSyncPeriod, "250ms");
  assert.equal(c.nftables.syncPeriod, "30s");
  assert.equal(c.logging.verbosity, 2);
  assert.equal(c.metricsBindAddress as unknown, "127.0.0.1:10249");
});

Deno.test("/configz shape: upstream's internal config, Go field names, under the group name", () => {
  const cfg = parseArgs([
    "--cluster-cidr=198.18.1.0/24",
    "--iptables-sync-period=2s",
    "--hostname-override=node-a",
    "--nodeport-addresses=primary",
  ]);
  const body = configzBody(cfg);
  assert.deepEqual(Object.keys(body), ["kubeproxy.config.k8s.io", "kube-nft-proxy"]);
  assert.deepEqual(body["kube-nft-proxy"], { version: "v0.1.0", kubeProxyCompatible: "v1.38" });
  const c = body["kubeproxy.config.k8s.io"] as Record<string, Record<string, unknown>>;
  // The internal type's field order.
  assert.deepEqual(Object.keys(c).slice(0, 8), [
    "Linux",
    "Windows",
    "FeatureGates",
    "ClientConnection",
    "Logging",
    "HostnameOverride",
    "BindAddress",
    "HealthzBindAddress",
  ]);
  assert.equal(c.Mode as unknown, "nftables");
  assert.equal(c.HostnameOverride as unknown, "node-a");
  assert.equal(c.SyncPeriod as unknown, "2s");
  assert.equal(c.MinSyncPeriod as unknown, "1s");
  assert.deepEqual(c.DetectLocal.ClusterCIDRs, ["198.18.1.0/24"]);
  assert.equal((c.Linux.Conntrack as Record<string, unknown>).TCPEstablishedTimeout, "24h0m0s");
  assert.equal(c.NFTables.MasqueradeBit, 14);
  assert.deepEqual(c.NodePortAddresses as unknown, ["primary"]);
  assert.equal(c.Logging.format, "text", "the logging part keeps its JSON tags");
  assert.deepEqual(JSON.parse(JSON.stringify(body)), body);
});
