import assert from "node:assert/strict";
import { FakeApiServer } from "../../tests/fakeapi/server.ts";
import { ApiFetch } from "./api_fetch.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { pagedList } from "./paged_list.ts";
import { slimService } from "./slim.ts";

function kubeconfig(api: FakeApiServer) {
  return kubeConfigFromString(api.kubeconfigYaml()).creds;
}

function fill(api: FakeApiServer, n: number): void {
  for (let i = 0; i < n; i++) {
    api.apply({
      kind: "Service",
      metadata: {
        name: `s${i}`,
        namespace: "ns",
        managedFields: [{ manager: "kubectl" }],
        annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}" },
      },
      spec: { clusterIP: `198.19.0.${i % 250}`, ports: [{ port: 80, targetPort: 8080 }] },
    });
  }
}

Deno.test("pagedList: pages of `limit` items, slimmed as they come", async () => {
  const api = FakeApiServer.start();
  try {
    fill(api, 23);
    const res = await pagedList(
      new ApiFetch(kubeconfig(api)),
      "/api/v1/services",
      {},
      slimService,
      {
        pageSize: 5,
      },
    );
    assert.equal(res.items.length, 23);
    assert.equal(res.metadata.resourceVersion, String(api.resourceVersion));
    assert.equal(api.requests.filter((r) => r.startsWith("/api/v1/services?")).length, 5);
    const first = res.items[0] as { metadata: Record<string, unknown>; spec: { ports: object[] } };
    assert.deepEqual(Object.keys(first.metadata).sort(), ["name", "namespace", "resourceVersion"]);
    assert.deepEqual(first.spec.ports, [{ port: 80 }]);
  } finally {
    await api.close();
  }
});

Deno.test("pagedList: an expired continue token starts the list over from the latest", async () => {
  const api = FakeApiServer.start();
  try {
    fill(api, 12);
    const fetcher = new ApiFetch(kubeconfig(api));
    let pages = 0;
    const real = fetcher.get.bind(fetcher);
    fetcher.get = async (path, query, signal) => {
      const res = await real(path, query, signal);
      if (++pages === 2) {
        // Between the first and second page the snapshot expires and the cluster changes.
        api.expireContinueTokens();
        fill(api, 14);
      }
      return res;
    };
    const res = await pagedList(
      fetcher,
      "/api/v1/services",
      { resourceVersion: "0" },
      slimService,
      {
        pageSize: 5,
      },
    );
    assert.equal(res.items.length, 14, "the whole latest list, not a mix");
    assert.ok(api.requests.some((r) => r.includes("continue=")));
  } finally {
    await api.close();
  }
});

Deno.test("pagedList: HTTP errors carry the status code", async () => {
  const api = FakeApiServer.start();
  try {
    api.failNext(1, 500);
    await assert.rejects(
      pagedList(new ApiFetch(kubeconfig(api)), "/api/v1/services", {}, slimService),
      (e: Error & { statusCode?: number }) => e.statusCode === 500,
    );
  } finally {
    await api.close();
  }
});

Deno.test("pagedList with a stream: each page handed over as it arrives; a restart says so", async () => {
  const api = FakeApiServer.start();
  try {
    fill(api, 12);
    const fetcher = new ApiFetch(kubeconfig(api));
    let pages = 0;
    const real = fetcher.get.bind(fetcher);
    fetcher.get = async (path, query, signal) => {
      const res = await real(path, query, signal);
      if (++pages === 2) {
        api.expireContinueTokens();
        api.remove("Service", "ns", "s0");
      }
      return res;
    };
    const seen: string[][] = [];
    const res = await pagedList(fetcher, "/api/v1/services", {}, undefined, {
      pageSize: 5,
      stream: {
        page: (items) => seen.push(items.map((o) => (o.metadata as { name: string }).name).sort()),
        restart: () => seen.push(["restart"]),
      },
    });
    assert.deepEqual(res.items, [], "everything went to the stream");
    assert.equal(res.metadata.resourceVersion, String(api.resourceVersion));
    // Two pages, then the expired token: the list starts over, without s0.
    assert.deepEqual(seen.slice(0, 2).map((p) => p.length), [5, 5]);
    assert.deepEqual(seen[2], ["restart"]);
    assert.deepEqual(seen.slice(3).map((p) => p.length), [5, 5, 1]);
    assert.ok(!seen.slice(3).flat().includes("s0"));
    // Unslimmed: the objects as the API server sent them.
    const whole: Record<string, unknown>[] = [];
    await pagedList(fetcher, "/api/v1/services", {}, undefined, {
      stream: { page: (items) => whole.push(...items), restart: () => {} },
    });
    assert.ok((whole[0].metadata as Record<string, unknown>).managedFields);
  } finally {
    await api.close();
  }
});
