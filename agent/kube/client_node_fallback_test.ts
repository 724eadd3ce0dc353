import assert from "node:assert/strict";
import { FakeApiServer } from "../../tests/fakeapi/server.ts";
import { ApiFetch } from "./api_fetch.ts";
import { reachable } from "./api_probe.ts";
import { startProxyInformers } from "./informers.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { Logger } from "../log.ts";
import { startTlsFront } from "../testdata/tls_front.ts";
import { waitForSync } from "./testdata/informers_wait.ts";

async function until(cond: () => boolean, what: string, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

Deno.test("https with insecure-skip-tls-verify: lists, watches and probes go through client-node", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 50 });
  const front = startTlsFront(api, { token: "t0k" });
  const conn = new ApiFetch(
    kubeConfigFromString([
      "clusters:",
      "- name: c",
      `  cluster: {server: '${front.url}', insecure-skip-tls-verify: true}`,
      "users:",
      "- name: u",
      "  user: {token: t0k}",
      "contexts:",
      "- name: c",
      "  context: {cluster: c, user: u}",
      "current-context: c",
    ].join("\n")).creds,
  );
  assert.equal(await conn.usable(), false);
  const names: string[] = [];
  const inf = startProxyInformers({
    api: conn,
    nodeName: "me",
    handlers: {
      services: {
        onAdd: (o) => names.push((o as { metadata: { name: string } }).metadata.name),
        onUpdate: () => {},
        onDelete: () => {},
      },
    },
    log: new Logger({ sink: { out: () => {}, err: () => {} } }),
    timing: { initialBackoffMs: 50, maxBackoffMs: 200, watchdogMs: 5000, probeIntervalMs: 0 },
  });
  try {
    api.apply({ kind: "Service", metadata: { name: "listed", namespace: "ns" }, spec: {} });
    await waitForSync(inf, 8000);
    await until(() => api.openWatches > 0, "the watch");
    api.apply({ kind: "Service", metadata: { name: "watched", namespace: "ns" }, spec: {} });
    await until(() => names.length === 2, "the watched Service");
    assert.deepEqual(names, ["listed", "watched"]);
    await reachable(conn);
    assert.ok(api.requests.includes("/version"));
    assert.ok(front.auth.length > 0 && front.auth.every((a) => a === "Bearer t0k"));
  } finally {
    await inf.stop();
    await api.close();
    await front.close();
  }
});
