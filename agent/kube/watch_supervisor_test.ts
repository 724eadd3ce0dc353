import assert from "node:assert/strict";
import { FakeApiServer, type KObject } from "../../tests/fakeapi/server.ts";
import { ApiFetch } from "./api_fetch.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { pagedList } from "./paged_list.ts";
import { identityStub } from "./slim.ts";
import { type InformerHandlers, type ListFn, WatchSupervisor } from "./watch_supervisor.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

const svc = (name: string): KObject => ({
  kind: "Service",
  metadata: { name, namespace: "ns" },
  spec: { clusterIP: "198.18.0.1" },
});

function recorder() {
  const events: string[] = [];
  const name = (o: unknown) => (o as KObject).metadata?.name;
  const handlers: InformerHandlers<unknown> = {
    onAdd: (o) => events.push(`add ${name(o)}`),
    onUpdate: (_a, b) => events.push(`update ${name(b)}`),
    onDelete: (o) => events.push(`delete ${name(o)}`),
    onSynced: () => events.push("synced"),
  };
  return { events, handlers };
}

Deno.test("a streamed list: pages delivered as they arrive, deletes once the list is whole", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 50 });
  const conn = new ApiFetch(kubeConfigFromString(api.kubeconfigYaml()).creds);
  for (const n of ["a", "b", "c", "d", "e"]) api.apply(svc(n));
  const r = recorder();
  // Pages of two; the first list holds its result until the test has looked.
  let open!: () => void;
  const held = new Promise<void>((g) => (open = g));
  let lists = 0;
  const list: ListFn<unknown> = async (q, stream) => {
    const res = await pagedList(conn, "/api/v1/services", q, undefined, {
      pageSize: 2,
      stream: stream as never,
    });
    if (++lists === 1) await held;
    return res as never;
  };
  const sup = new WatchSupervisor<unknown>({
    name: "services",
    api: conn,
    path: "/api/v1/services",
    list,
    handlers: r.handlers,
    stub: identityStub,
    initialBackoffMs: 50,
    watchdogMs: 60_000,
  });
  try {
    sup.start();
    // Every page was delivered before the list returned: adds, no synced yet.
    await until(() => r.events.length === 5, "five adds");
    assert.deepEqual(r.events, ["add a", "add b", "add c", "add d", "add e"]);
    assert.equal(sup.synced, false);
    open();
    await until(() => sup.synced, "synced");
    assert.equal(r.events.at(-1), "synced");
    // A re-list after a restart (the watch is stopped at once, the list comes 50 ms later):
    // one changed, one gone; the delete comes once every page is in.
    r.events.length = 0;
    sup.restart("test");
    api.remove("Service", "ns", "b");
    api.apply({ ...svc("d"), spec: { clusterIP: "198.18.0.2" } });
    await until(() => r.events.includes("delete b"), "the delete");
    assert.deepEqual(r.events, ["update d", "delete b"]);
    assert.equal(lists, 2);
  } finally {
    await sup.stop();
    await api.close();
  }
});

Deno.test("a first list that starts over (expired token) deletes what only its first try saw", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 50 });
  const conn = new ApiFetch(kubeConfigFromString(api.kubeconfigYaml()).creds);
  for (const n of ["a", "b", "c", "d", "e"]) api.apply(svc(n));
  let gets = 0;
  const real = conn.get.bind(conn);
  conn.get = async (path, query, signal) => {
    const res = await real(path, query, signal);
    if (query.limit !== undefined && ++gets === 2) {
      // After the second page's answer: the snapshot expires and "a" (on page one) goes.
      api.expireContinueTokens();
      api.remove("Service", "ns", "a");
    }
    return res;
  };
  const r = recorder();
  const sup = new WatchSupervisor<unknown>({
    name: "services",
    api: conn,
    path: "/api/v1/services",
    list: (q, stream) =>
      pagedList(conn, "/api/v1/services", q, undefined, { pageSize: 2, stream: stream as never }),
    handlers: r.handlers,
    stub: identityStub,
    watchdogMs: 60_000,
  });
  try {
    sup.start();
    await until(() => sup.synced, "synced");
    assert.deepEqual(r.events.filter((e) => !e.startsWith("add")), ["delete a", "synced"]);
    assert.deepEqual([...sup.snapshot().keys()].sort(), ["ns/b", "ns/c", "ns/d", "ns/e"]);
  } finally {
    await sup.stop();
    await api.close();
  }
});
