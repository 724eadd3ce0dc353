/**
 * The API server's resourceVersion going backwards (etcd restored from a backup): the informers
 * must say so, not crash, drop nothing the server still has, and converge on the server's state.
 * The fake server behaves as the real one's watch cache does with a version it has not reached:
 * a list asking for it gets 504 "Too large resource version", a watch from it stays silent.
 */
import assert from "node:assert/strict";
import { FakeApiServer, type KObject } from "../../tests/fakeapi/server.ts";
import { type InformerHandlers, WatchSupervisor } from "./watch_supervisor.ts";
import { ApiFetch } from "./api_fetch.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { pagedList } from "./paged_list.ts";
import { Logger } from "../log.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function svc(name: string, v = "1"): KObject {
  return {
    kind: "Service",
    metadata: { name, namespace: "ns1", labels: { v } },
    spec: { clusterIP: "198.18.0.1" },
  };
}

/** The supervisor under test, the objects it delivered (name -> label v), and its log. */
function rig(api: FakeApiServer, extra: Record<string, unknown> = {}) {
  const conn = new ApiFetch(kubeConfigFromString(api.kubeconfigYaml()).creds);
  const view = new Map<string, string>();
  const deleted: string[] = [];
  const label = (o: unknown) => (o as KObject).metadata?.labels?.v ?? "";
  const name = (o: unknown) => (o as KObject).metadata!.name!;
  const handlers: InformerHandlers<unknown> = {
    onAdd: (o) => view.set(name(o), label(o)),
    onUpdate: (_a, b) => view.set(name(b), label(b)),
    onDelete: (o) => {
      deleted.push(name(o));
      view.delete(name(o));
    },
  };
  const lines: string[] = [];
  const sup = new WatchSupervisor<unknown>({
    name: "services",
    api: conn,
    path: "/api/v1/services",
    list: (s) => pagedList(conn, "/api/v1/services", s, (o) => o),
    handlers,
    log: new Logger({
      verbosity: 4,
      sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
    }),
    initialBackoffMs: 50,
    maxBackoffMs: 200,
    watchdogMs: 600,
    ...extra,
  });
  return { sup, view, deleted, lines };
}

/** The server's current objects, as name -> label v. */
function serverView(api: FakeApiServer): Map<string, string> {
  return new Map(
    api.list("Service").map((o) => [o.metadata!.name!, (o.metadata!.labels as { v: string }).v]),
  );
}

const sorted = (m: Map<string, string>) => [...m].sort().map(([k, v]) => `${k}=${v}`);

Deno.test("the fake server: a restore takes the version back; a newer version is refused", async () => {
  const api = FakeApiServer.start();
  try {
    api.apply(svc("a"));
    const snap = api.snapshot();
    api.apply(svc("b"));
    api.restore(snap);
    assert.equal(api.resourceVersion, 1);
    assert.deepEqual(api.list("Service").map((o) => o.metadata?.name), ["a"]);
    const res = await fetch(
      `${api.url}/api/v1/services?resourceVersion=2&resourceVersionMatch=NotOlderThan`,
    );
    assert.equal(res.status, 504);
    const body = await res.json();
    assert.equal(body.details.causes[0].reason, "ResourceVersionTooLarge");
    assert.match(body.message, /Too large resource version: 2, current: 1/);
    const ok = await fetch(
      `${api.url}/api/v1/services?resourceVersion=1&resourceVersionMatch=NotOlderThan`,
    );
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
  } finally {
    await api.close();
  }
});

Deno.test("an API server restored from a backup: logged, nothing the server has is dropped, converged", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 50 });
  const { sup, view, deleted, lines } = rig(api);
  try {
    api.apply(svc("a"));
    api.apply(svc("b"));
    const backup = api.snapshot(); // resourceVersion 2
    sup.start();
    await until(() => sup.synced, "synced");
    // Later changes the agent sees: it is now at resourceVersion 5.
    api.apply(svc("c"));
    api.apply(svc("a", "2"));
    api.apply(svc("d"));
    await until(() => view.size === 4 && view.get("a") === "2", "the later changes");
    // The API server goes down and comes back from the backup, at resourceVersion 2.
    await api.down();
    api.restore(backup);
    api.up();
    // Writes after the restore reuse versions the agent has already seen (3 and 4).
    api.apply(svc("e"));
    api.apply(svc("b", "2"));
    await until(
      () => sorted(view).join() === sorted(serverView(api)).join(),
      "the agent's view to converge on the server's",
    );
    assert.deepEqual(sorted(view), ["a=1", "b=2", "e=1"]);
    // Only what the server no longer has went; a and b were never dropped.
    assert.deepEqual(deleted.sort(), ["c", "d"]);
    const log = lines.join("\n");
    assert.match(log, /went back/, log);
    assert.match(log, /resourceVersion="?5/, log);
    // And it keeps following the server.
    api.apply(svc("f"));
    await until(() => view.has("f"), "a change after recovery");
    await until(() => sup.healthy, "healthy");
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("a watch resumed past the restored server's version: the watchdog re-lists, converged", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 50 });
  const { sup, view, deleted, lines } = rig(api);
  try {
    api.apply(svc("a"));
    const backup = api.snapshot(); // resourceVersion 1
    sup.start();
    await until(() => sup.synced && api.openWatches === 1, "synced and watching");
    api.apply(svc("b"));
    api.apply(svc("c"));
    await until(() => view.size === 3, "b and c");
    // A clean end of the watch streams (a graceful restart), then the restored data: the watch
    // resumes from 3, which this server has not reached, and hears nothing.
    api.restore(backup);
    api.apply(svc("x")); // version 2: never sent on a watch from 3
    await until(
      () => sorted(view).join() === sorted(serverView(api)).join(),
      "the agent's view to converge on the server's",
    );
    assert.deepEqual(sorted(view), ["a=1", "x=1"]);
    assert.deepEqual(deleted.sort(), ["b", "c"]);
    assert.match(lines.join("\n"), /went back/);
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("a watch event older than what was seen is logged and followed", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 1000 });
  const { sup, view, lines } = rig(api);
  try {
    api.apply(svc("a"));
    api.apply(svc("b"));
    api.apply(svc("a", "2"));
    sup.start();
    await until(() => sup.synced && api.openWatches === 1, "synced and watching");
    // A misbehaving server or proxy replays an old version of a (resourceVersion 1 < 3).
    const old = {
      ...api.get("Service", "ns1", "a")!,
      metadata: { name: "a", namespace: "ns1", resourceVersion: "1", labels: { v: "old" } },
    };
    api.sendRaw("Service", JSON.stringify({ type: "MODIFIED", object: old }));
    await until(() => view.get("a") === "old", "the event delivered");
    assert.match(lines.join("\n"), /went back/);
    api.apply(svc("c"));
    await until(() => view.has("c"), "later events");
  } finally {
    await sup.stop();
    await api.close();
  }
});
