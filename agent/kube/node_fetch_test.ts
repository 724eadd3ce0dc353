import assert from "node:assert/strict";
import { ApiFetch } from "./api_fetch.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { Logger } from "../log.ts";
import { fetchNode, type NodeBackoff, nodeHostIPs } from "./node_fetch.ts";
import { FakeApiServer } from "../../tests/fakeapi/server.ts";

/** Upstream's six tries, at 10 ms instead of a second. */
const FAST: NodeBackoff = { steps: 6, initialMs: 10, factor: 2, jitter: 0.2 };

function rig() {
  const api = FakeApiServer.start();
  const conn = new ApiFetch(kubeConfigFromString(api.kubeconfigYaml()).creds);
  const lines: string[] = [];
  const log = new Logger({ sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) } });
  return { api, conn, lines, log };
}

const withIP = {
  kind: "Node",
  metadata: { name: "me", labels: { zone: "a" } },
  status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
};

Deno.test("nodeHostIPs: InternalIPs, else ExternalIPs", () => {
  const n = (addrs: [string, string][]) => ({
    status: { addresses: addrs.map(([type, address]) => ({ type, address })) },
  });
  assert.deepEqual(nodeHostIPs(n([["ExternalIP", "203.0.113.1"], ["InternalIP", "2001:db8::1"]])), [
    "2001:db8::1",
  ]);
  assert.deepEqual(nodeHostIPs(n([["ExternalIP", "203.0.113.1"]])), ["203.0.113.1"]);
  assert.deepEqual(nodeHostIPs(undefined), []);
});

Deno.test("fetchNode: an existing Node with an IP is read at once", async () => {
  const { api, conn, lines, log } = rig();
  try {
    api.apply(withIP);
    const node = await fetchNode({ api: conn, nodeName: "me", log, backoff: FAST });
    assert.equal(node?.metadata?.labels?.zone, "a");
    assert.equal(api.requests.filter((r) => r.startsWith("/api/v1/nodes/me")).length, 1);
    assert.ok(lines.some((l) => /Successfully retrieved node IP\(s\)/.test(l)), lines.join("\n"));
  } finally {
    await api.close();
  }
});

Deno.test("fetchNode: retries with backoff until the Node appears, logging each miss", async () => {
  const { api, conn, lines, log } = rig();
  try {
    setTimeout(() => api.apply(withIP), 40);
    const node = await fetchNode({ api: conn, nodeName: "me", log, backoff: FAST });
    assert.ok(node, "found");
    const misses = lines.filter((l) => /Failed to retrieve node info/.test(l));
    assert.ok(misses.length >= 1 && misses.length < FAST.steps, lines.join("\n"));
  } finally {
    await api.close();
  }
});

Deno.test("fetchNode: gives up after the last try; a Node without IPs is still returned", async () => {
  const { api, conn, lines, log } = rig();
  try {
    assert.equal(await fetchNode({ api: conn, nodeName: "me", log, backoff: FAST }), undefined);
    assert.equal(lines.filter((l) => /Failed to retrieve node info/.test(l)).length, FAST.steps);
    api.apply({ kind: "Node", metadata: { name: "me" }, status: { addresses: [] } });
    lines.length = 0;
    const bare = await fetchNode({ api: conn, nodeName: "me", log, backoff: FAST });
    assert.equal(bare?.metadata?.name, "me");
    assert.equal(lines.filter((l) => /Failed to retrieve node IPs/.test(l)).length, FAST.steps);
  } finally {
    await api.close();
  }
});

Deno.test("fetchNode: an abort ends the wait", async () => {
  const { api, conn, log } = rig();
  try {
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 30);
    const slow: NodeBackoff = { ...FAST, initialMs: 60_000 };
    const t0 = Date.now();
    const node = await fetchNode({
      api: conn,
      nodeName: "me",
      log,
      backoff: slow,
      signal: abort.signal,
    });
    assert.equal(node, undefined);
    assert.ok(Date.now() - t0 < 5000, "did not sleep out the backoff");
  } finally {
    await api.close();
  }
});
