import assert from "node:assert/strict";
import { Registry } from "../../net/prometheus.ts";
import { registerRejectedPackets } from "./rejected_metric.ts";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import { Transaction } from "../../ffi/nftables/types.ts";

Deno.test("rejected packets: read from the named counters at each scrape, per family and protocol", async () => {
  const v4 = new MemoryNftables("ip", "kube-proxy");
  const v6 = new MemoryNftables("ip6", "kube-proxy"); // no table yet: reports nothing
  await v4.run(
    new Transaction().add({ kind: "table" })
      .add({ kind: "counter", name: "localhost-nodeport-rejected-udp" })
      .add({ kind: "counter", name: "localhost-nodeport-rejected-sctp" }),
  );
  const reg = new Registry();
  registerRejectedPackets(reg, { 4: v4, 6: v6 }, [4, 6]);
  v4.countPackets("localhost-nodeport-rejected-udp", 7);
  v4.countPackets("localhost-nodeport-rejected-sctp", 3);
  const text = await reg.metrics();
  assert.match(
    text,
    /kubeproxy_nftables_localhost_nodeport_rejected_packets_total\{ip_family="IPv4",protocol="UDP"\} 7/,
  );
  assert.match(text, /\{ip_family="IPv4",protocol="SCTP"\} 3/);
  assert.ok(!text.includes('ip_family="IPv6"'));
  v4.countPackets("localhost-nodeport-rejected-udp", 1);
  assert.match(await reg.metrics(), /protocol="UDP"\} 8/, "the next scrape reads again");
});
