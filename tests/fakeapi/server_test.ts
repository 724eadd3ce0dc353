import assert from "node:assert/strict";
import { CoreV1Api, KubeConfig, ListWatch, Watch } from "@kubernetes/client-node";
import { FakeApiServer, type KObject, parseFieldSelector, parseLabelSelector } from "./server.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

function svc(name: string, labels: Record<string, string> = {}, ns = "ns1"): KObject {
  return {
    kind: "Service",
    metadata: { name, namespace: ns, labels },
    spec: { clusterIP: "198.18.0.10" },
  };
}

/** Reads watch events from a raw watch request until `n` arrived (or the stream ended). */
async function readEvents(url: string, n: number, timeoutMs = 3000) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), timeoutMs);
  const res = await fetch(url, { signal: ac.signal });
  // deno-lint-ignore no-explicit-any
  const events: Array<{ type: string; object: any }> = [];
  let buf = "";
  const dec = new TextDecoder();
  try {
    for await (const chunk of res.body!) {
      buf += dec.decode(chunk);
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        events.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
      if (events.length >= n) break;
    }
  } catch (e) {
    if (!ac.signal.aborted) throw e;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return events;
}

Deno.test("label and field selector parsing", () => {
  const o = { metadata: { name: "a", namespace: "x", labels: { app: "web", tier: "fe" } } };
  const yes = (s: string) => assert.equal(parseLabelSelector(s)(o), true, s);
  const no = (s: string) => assert.equal(parseLabelSelector(s)(o), false, s);
  yes("");
  yes("app=web");
  yes("app==web");
  no("app=db");
  yes("app!=db");
  no("app!=web");
  yes("missing!=x");
  yes("app");
  no("missing");
  yes("!missing");
  no("!app");
  yes("app in (db, web)");
  no("app in (db)");
  yes("app notin (db)");
  no("app notin (web,db)");
  yes("app=web,tier in (fe,be),!missing");
  no("app=web,tier=be");
  assert.throws(() => parseLabelSelector("app=(x"), /unable to parse/);
  assert.equal(parseFieldSelector("metadata.name=a")(o), true);
  assert.equal(parseFieldSelector("metadata.name=b")(o), false);
  assert.equal(parseFieldSelector("metadata.namespace=x,metadata.name!=b")(o), true);
  assert.throws(() => parseFieldSelector("spec.x=1"), /not supported/);
});

Deno.test("list, get, 404s and resourceVersions", async () => {
  const api = FakeApiServer.start({ serviceCIDRs: false });
  try {
    const a = api.apply(svc("a"));
    assert.equal(a.metadata?.resourceVersion, "1");
    api.apply(svc("b", {}, "ns2"));
    api.apply({ kind: "Node", metadata: { name: "n1" } });
    let r = await (await fetch(`${api.url}/api/v1/services`)).json();
    assert.equal(r.kind, "ServiceList");
    assert.equal(r.metadata.resourceVersion, "3");
    assert.deepEqual(r.items.map((i: KObject) => i.metadata?.name), ["a", "b"]);
    assert.equal(r.items[0].kind, undefined); // list items carry no kind, like the real server
    r = await (await fetch(`${api.url}/api/v1/namespaces/ns2/services`)).json();
    assert.deepEqual(r.items.map((i: KObject) => i.metadata?.name), ["b"]);
    r = await (await fetch(`${api.url}/api/v1/namespaces/ns1/services/a`)).json();
    assert.equal(r.metadata.uid, a.metadata?.uid);
    r = await (await fetch(`${api.url}/api/v1/nodes/n1`)).json();
    assert.equal(r.metadata.namespace, undefined);
    for (const p of ["/api/v1/pods", "/apis/networking.k8s.io/v1/servicecidrs", "/nothing"]) {
      const res = await fetch(api.url + p);
      assert.equal(res.status, 404, p);
      assert.equal((await res.json()).kind, "Status");
    }
    const bad = await fetch(
      `${api.url}/api/v1/services?labelSelector=${encodeURIComponent("a=(")}`,
    );
    assert.equal(bad.status, 400);
    await bad.body?.cancel();
    // Updates keep uid and creationTimestamp, bump resourceVersion.
    const a2 = api.apply(svc("a", { v: "2" }));
    assert.equal(a2.metadata?.uid, a.metadata?.uid);
    assert.equal(a2.metadata?.resourceVersion, "4");
    assert.equal(api.remove("Service", "ns1", "a"), true);
    assert.equal(api.remove("Service", "ns1", "a"), false);
    assert.equal(api.resourceVersion, 5);
    assert.throws(() => api.apply({ kind: "Pod", metadata: { name: "x" } }), /unsupported kind/);
  } finally {
    await api.close();
  }
});

Deno.test("watch replays after a resourceVersion, then 410 once compacted", async () => {
  const api = FakeApiServer.start();
  try {
    api.apply(svc("a"));
    api.apply(svc("b"));
    api.apply(svc("a", { x: "1" }));
    api.remove("Service", "ns1", "b");
    let ev = await readEvents(`${api.url}/api/v1/services?watch=true&resourceVersion=1`, 3);
    assert.deepEqual(ev.map((e) => [e.type, e.object.metadata.name]), [
      ["ADDED", "b"],
      ["MODIFIED", "a"],
      ["DELETED", "b"],
    ]);
    assert.equal(ev[0].object.kind, "Service");
    // Without a resourceVersion: synthetic ADDED for the current state.
    ev = await readEvents(`${api.url}/api/v1/services?watch=true`, 1);
    assert.deepEqual(ev.map((e) => [e.type, e.object.metadata.name]), [["ADDED", "a"]]);
    api.compact();
    ev = await readEvents(`${api.url}/api/v1/services?watch=true&resourceVersion=2`, 1);
    assert.equal(ev[0].type, "ERROR");
    assert.equal(ev[0].object.code, 410);
    assert.equal(ev[0].object.reason, "Expired");
    // From the compaction point on, watching works again.
    const live = readEvents(`${api.url}/api/v1/services?watch=true&resourceVersion=4`, 1);
    await until(() => api.openWatches === 1, "watch open");
    api.apply(svc("c"));
    assert.deepEqual((await live).map((e) => e.object.metadata.name), ["c"]);
  } finally {
    await api.close();
  }
});

Deno.test("watch with selectors sends ADDED/DELETED on selection changes; bookmarks", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 50 });
  try {
    const sel = encodeURIComponent("app=web");
    const p = readEvents(
      `${api.url}/api/v1/services?watch=true&resourceVersion=0&labelSelector=${sel}`,
      3,
    );
    await until(() => api.openWatches === 1, "watch open");
    api.apply(svc("a", { app: "db" })); // not selected
    api.apply(svc("a", { app: "web" })); // enters -> ADDED
    api.apply(svc("a", { app: "web", v: "2" })); // MODIFIED
    api.apply(svc("a", { app: "db" })); // leaves -> DELETED
    assert.deepEqual((await p).map((e) => e.type), ["ADDED", "MODIFIED", "DELETED"]);
    const fsel = encodeURIComponent("metadata.name=n2");
    const nodes = readEvents(
      `${api.url}/api/v1/nodes?watch=true&resourceVersion=0&fieldSelector=${fsel}&allowWatchBookmarks=true`,
      2,
    );
    await until(() => api.openWatches === 1, "node watch open");
    api.apply({ kind: "Node", metadata: { name: "n1" } });
    api.apply({ kind: "Node", metadata: { name: "n2" } });
    const ev = await nodes;
    assert.deepEqual(ev[0].type, "ADDED");
    assert.equal(ev[0].object.metadata.name, "n2");
    assert.equal(ev[1].type, "BOOKMARK");
    assert.equal(ev[1].object.metadata.resourceVersion, String(api.resourceVersion));
  } finally {
    await api.close();
  }
});

Deno.test("fault injection: failNext, down/up on the same port", async () => {
  const api = FakeApiServer.start();
  try {
    api.failNext(1, 503, (p) => p.includes("nodes"));
    let res = await fetch(`${api.url}/api/v1/services`);
    assert.equal(res.status, 200);
    await res.body?.cancel();
    res = await fetch(`${api.url}/api/v1/nodes`);
    assert.equal(res.status, 503);
    assert.equal((await res.json()).code, 503);
    api.failNext(2);
    assert.equal(
      (await fetch(`${api.url}/api/v1/nodes`).then((r) => (r.body?.cancel(), r))).status,
      500,
    );
    assert.equal(
      (await fetch(`${api.url}/api/v1/nodes`).then((r) => (r.body?.cancel(), r))).status,
      500,
    );
    res = await fetch(`${api.url}/api/v1/nodes`);
    assert.equal(res.status, 200);
    await res.body?.cancel();
    const port = api.port;
    await api.down();
    await assert.rejects(fetch(`${api.url}/api/v1/nodes`));
    api.up();
    assert.equal(api.port, port);
    res = await fetch(`${api.url}/api/v1/nodes`);
    assert.equal(res.status, 200);
    await res.body?.cancel();
  } finally {
    await api.close();
  }
});

Deno.test("client-node informer against the fake server: add/update/delete and 410 re-list", async () => {
  const api = FakeApiServer.start({ bookmarkIntervalMs: 100_000 });
  const path = api.writeKubeconfig();
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  const core = kc.makeApiClient(CoreV1Api);
  const lw = new ListWatch(
    "/api/v1/services",
    new Watch(kc),
    () => core.listServiceForAllNamespaces(),
    false,
  );
  const seen: string[] = [];
  lw.on("add", (o) => seen.push(`add ${o.metadata?.name}`));
  lw.on("update", (o) => seen.push(`update ${o.metadata?.name}`));
  lw.on("delete", (o) => seen.push(`delete ${o.metadata?.name}`));
  try {
    api.apply(svc("a"));
    await lw.start();
    await until(() => api.openWatches === 1, "watch open");
    api.apply(svc("b"));
    api.apply(svc("a", { v: "2" }));
    api.remove("Service", "ns1", "b");
    await until(() => seen.length === 4, "4 events");
    assert.deepEqual(seen, ["add a", "add b", "update a", "delete b"]);
    // The watch ends, changes happen and history is compacted: the reconnect gets 410 and the
    // informer lists again, delivering the difference.
    api.dropWatches();
    api.apply(svc("c"));
    api.remove("Service", "ns1", "a");
    api.compact();
    await until(() => seen.length === 6, "re-list events");
    assert.deepEqual(seen.slice(4).sort(), ["add c", "delete a"]);
    assert.ok(api.requests.filter((r) => r === "/api/v1/services").length >= 2, "re-listed");
  } finally {
    await lw.stop();
    await api.close();
    Deno.removeSync(path);
  }
});
