import assert from "node:assert/strict";
import { parseArgs } from "./flags.ts";
import { Logger } from "./log.ts";
import { buildNode, informerHandlers, nodeFamilies, proxierConfig } from "./node.ts";
import { FakeNet } from "./localhost/testing.ts";
import { MemoryNftables } from "../ffi/nftables/memory/client.ts";
import { Transaction } from "../ffi/nftables/types.ts";
import { nftFamily } from "../net/family.ts";

const quiet = new Logger({ verbosity: 0, sink: { out: () => {}, err: () => {} } });

Deno.test("IP families follow the Node's primary IPs, then --bind-address", () => {
  const node = (addrs: [string, string][]) => ({
    status: { addresses: addrs.map(([type, address]) => ({ type, address })) },
  });
  assert.deepEqual(nodeFamilies(node([["InternalIP", "198.18.0.1"]]), "0.0.0.0"), [4]);
  assert.deepEqual(
    nodeFamilies(node([["InternalIP", "198.18.0.1"], ["InternalIP", "2001:db8::1"]]), ""),
    [4, 6],
  );
  // ExternalIP only counts when there is no InternalIP.
  assert.deepEqual(
    nodeFamilies(node([["InternalIP", "2001:db8::1"], ["ExternalIP", "198.18.0.1"]]), "0.0.0.0"),
    [6],
  );
  assert.deepEqual(nodeFamilies(undefined, "198.18.0.7"), [4]);
  assert.deepEqual(nodeFamilies(undefined, "0.0.0.0"), []);
});

Deno.test("flags map onto the rule builder's settings", () => {
  const c1 = proxierConfig(parseArgs(["--cluster-cidr=198.18.0.0/16", "--masquerade-all"]));
  assert.deepEqual(c1.localDetector, { mode: "ClusterCIDR", cidrs: ["198.18.0.0/16"] });
  assert.equal(c1.masqueradeAll, true);
  assert.equal(c1.masqueradeBit, 14);
  assert.deepEqual(proxierConfig(parseArgs([])).localDetector, { mode: "None" });
  const c2 = proxierConfig(
    parseArgs(["--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth"]),
  );
  assert.deepEqual(c2.localDetector, { mode: "InterfaceNamePrefix", prefix: "veth" });
  assert.deepEqual(proxierConfig(parseArgs(["--nodeport-addresses=primary"])).nodePortAddresses, [
    "primary",
  ]);
});

Deno.test("buildNode: one proxier per family; a table with chains means adoption", async () => {
  const fakes = {
    4: new MemoryNftables("ip", "kube-proxy"),
    6: new MemoryNftables("ip6", "kube-proxy"),
  };
  await fakes[6].run(new Transaction().add({ kind: "table" }).add({ kind: "chain", name: "x" }));
  const node = await buildNode(parseArgs([]), { nftables: (f) => fakes[f] }, {
    nodeName: "me",
    families: [4, 6],
    log: quiet,
  });
  assert.deepEqual(node.engine.families, [4, 6]);
  assert.equal(node.adopted, true);
  assert.equal(node.proxiers[6]!.nextSyncFull, true);
  await node.close();
  // A dry run never adopts; families not asked for get no proxier.
  const dry = await buildNode(parseArgs(["--dry-run"]), {
    nftables: (f) => new MemoryNftables(nftFamily(f), "kube-proxy"),
  }, { nodeName: "me", families: [4], log: quiet });
  assert.equal(dry.adopted, false);
  assert.equal(dry.proxiers[6], undefined);
  await dry.close();
});

Deno.test("informer events go to the engine; it syncs once both lists are in", async () => {
  const fake = new MemoryNftables("ip", "kube-proxy");
  const node = await buildNode(parseArgs(["--dry-run"]), { nftables: () => fake }, {
    nodeName: "me",
    families: [4],
    log: quiet,
    proxier: { trimMemory: false },
  });
  const h = informerHandlers(node.engine);
  h.node.onAdd({
    metadata: { name: "me" },
    status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
  });
  h.services.onAdd({
    metadata: { namespace: "ns", name: "web", resourceVersion: "1" },
    spec: { clusterIP: "198.19.0.10", ports: [{ name: "p", protocol: "TCP", port: 80 }] },
  });
  assert.equal(node.state.hasPendingChanges(), true);
  h.services.onSynced!();
  assert.equal(await node.engine.syncNow(), undefined, "not before EndpointSlices synced");
  h.endpointSlices.onSynced!();
  const round = await node.engine.syncNow();
  assert.equal(round?.results[4]?.full, true);
  assert.ok((await fake.listElements("map", "no-endpoint-services")).length > 0);
  await node.close();
});

Deno.test("buildNode: the localhost proxy from this start's flags and gate; a dry run shows the rules only", async () => {
  const build = async (args: string[]) => {
    const fakes = {
      4: new MemoryNftables("ip", "kube-proxy"),
      6: new MemoryNftables("ip6", "kube-proxy"),
    };
    const node = await buildNode(parseArgs(args), { nftables: (f) => fakes[f] }, {
      nodeName: "me",
      families: [4, 6],
      log: quiet,
      adopted: false,
      localhostNet: new FakeNet(),
    });
    node.engine.markSynced("services");
    node.engine.markSynced("endpointSlices");
    await node.engine.syncNow();
    const jumps = (f: 4 | 6) => fakes[f].dump().includes("jump localhost-nodeports-check");
    const out = { families: node.localhost.families, rules: [jumps(4), jumps(6)] };
    await node.close();
    return out;
  };
  assert.deepEqual(await build(["--nodeport-addresses=primary,localhost"]), {
    families: [4, 6],
    rules: [true, true],
  });
  assert.deepEqual(await build(["--nodeport-addresses=primary,127.0.0.1/32"]), {
    families: [4],
    rules: [true, false],
  });
  assert.deepEqual(await build(["--nodeport-addresses=all"]), {
    families: [],
    rules: [false, false],
  });
  assert.deepEqual(
    await build([
      "--nodeport-addresses=primary,localhost",
      "--feature-gates=KubeProxyNFTablesLocalhostNodePorts=false",
    ]),
    { families: [], rules: [false, false] },
  );
  assert.deepEqual(await build(["--nodeport-addresses=primary,localhost", "--dry-run"]), {
    families: [],
    rules: [true, true],
  });
});
