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
