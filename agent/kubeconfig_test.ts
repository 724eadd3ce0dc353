import assert from "node:assert/strict";
import { CoreV1Api } from "@kubernetes/client-node";
import { FakeApiServer } from "../tests/fakeapi/server.ts";
import { KubeConfigError, loadKubeConfig } from "./kubeconfig.ts";

const envOf = (vars: Record<string, string>) => (n: string) => vars[n];

async function listNames(kc: Parameters<typeof loadKubeConfig>[0] & object) {
  const { kc: cfg } = loadKubeConfig(kc);
  const list = await cfg.makeApiClient(CoreV1Api).listNode();
  return list.items.map((n) => n.metadata?.name);
}

Deno.test("--kubeconfig file is used and reaches the API server", async () => {
  const api = FakeApiServer.start();
  const path = api.writeKubeconfig();
  try {
    api.apply({ kind: "Node", metadata: { name: "n1" } });
    const r = loadKubeConfig({ kubeconfig: path, env: envOf({}) });
    assert.equal(r.source, "kubeconfig");
    assert.equal(r.server, api.url);
    assert.deepEqual(await listNames({ kubeconfig: path, env: envOf({}) }), ["n1"]);
  } finally {
    Deno.removeSync(path);
    await api.close();
  }
});

Deno.test("--master overrides the kubeconfig's server", async () => {
  const api = FakeApiServer.start();
  const dead = FakeApiServer.start();
  const path = dead.writeKubeconfig(); // points at a server we stop
  await dead.close();
  try {
    api.apply({ kind: "Node", metadata: { name: "n2" } });
    const r = loadKubeConfig({ kubeconfig: path, master: api.url, env: envOf({}) });
    assert.equal(r.server, api.url);
    assert.equal(r.kc.getCurrentUser()?.token, "fake-token"); // credentials kept
    assert.deepEqual(await listNames({ kubeconfig: path, master: api.url, env: envOf({}) }), [
      "n2",
    ]);
  } finally {
    Deno.removeSync(path);
    await api.close();
  }
});

Deno.test("--master alone works without a kubeconfig (plain http allowed)", async () => {
  const api = FakeApiServer.start();
  try {
    api.apply({ kind: "Node", metadata: { name: "n3" } });
    const r = loadKubeConfig({ master: api.url, env: envOf({}) });
    assert.equal(r.source, "master");
    assert.equal(r.kc.getCurrentCluster()?.skipTLSVerify, true);
    assert.deepEqual(await listNames({ master: api.url, env: envOf({}) }), ["n3"]);
  } finally {
    await api.close();
  }
});

Deno.test("in-cluster config when KUBERNETES_SERVICE_HOST is set", () => {
  const dir = Deno.makeTempDirSync();
  const sa = `${dir}/var/run/secrets/kubernetes.io/serviceaccount`;
  Deno.mkdirSync(sa, { recursive: true });
  Deno.writeTextFileSync(`${sa}/token`, "tok");
  Deno.writeTextFileSync(`${sa}/ca.crt`, "");
  Deno.writeTextFileSync(`${sa}/namespace`, "kube-system");
  // client-node reads host and port from the process environment.
  const saved = [Deno.env.get("KUBERNETES_SERVICE_HOST"), Deno.env.get("KUBERNETES_SERVICE_PORT")];
  Deno.env.set("KUBERNETES_SERVICE_HOST", "198.18.0.1");
  Deno.env.set("KUBERNETES_SERVICE_PORT", "6443");
  try {
    const env = (n: string) => Deno.env.get(n);
    const r = loadKubeConfig({ env, serviceAccountPrefix: dir });
    assert.equal(r.source, "in-cluster");
    assert.equal(r.server, "https://198.18.0.1:6443");
    assert.throws(
      () => loadKubeConfig({ env, serviceAccountPrefix: `${dir}/nope` }),
      (e) =>
        e instanceof KubeConfigError &&
        /token is missing|missing; pass --kubeconfig/.test(e.message),
    );
    // --kubeconfig wins over in-cluster.
    const api = FakeApiServer.start();
    const path = api.writeKubeconfig();
    try {
      assert.equal(loadKubeConfig({ kubeconfig: path, env }).source, "kubeconfig");
    } finally {
      Deno.removeSync(path);
      void api.close();
    }
  } finally {
    for (
      const [k, v] of [["KUBERNETES_SERVICE_HOST", saved[0]], ["KUBERNETES_SERVICE_PORT", saved[1]]]
    ) {
      if (v === undefined) Deno.env.delete(k!);
      else Deno.env.set(k!, v);
    }
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("default: $KUBECONFIG, then ~/.kube/config, else a clear error", async () => {
  const api = FakeApiServer.start();
  const home = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${home}/.kube`);
    api.writeKubeconfig(`${home}/.kube/config`);
    let r = loadKubeConfig({ env: envOf({ HOME: home }) });
    assert.equal(r.source, "default");
    assert.equal(r.server, api.url);
    const other = api.writeKubeconfig();
    r = loadKubeConfig({ env: envOf({ HOME: "/nonexistent", KUBECONFIG: other }) });
    assert.equal(r.server, api.url);
    Deno.removeSync(other);
    assert.throws(
      () => loadKubeConfig({ env: envOf({ HOME: "/nonexistent" }) }),
      (e) =>
        e instanceof KubeConfigError &&
        /pass --kubeconfig=<file> or --master=<url>/.test(e.message),
    );
    assert.throws(
      () => loadKubeConfig({ kubeconfig: "/nonexistent/kc", env: envOf({}) }),
      (e) =>
        e instanceof KubeConfigError &&
        /--kubeconfig \/nonexistent\/kc: cannot load/.test(e.message),
    );
  } finally {
    Deno.removeSync(home, { recursive: true });
    await api.close();
  }
});
