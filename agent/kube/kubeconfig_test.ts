import assert from "node:assert/strict";
import { FakeApiServer } from "../../tests/fakeapi/server.ts";
import { ApiFetch } from "./api_fetch.ts";
import { KubeConfigError, loadKubeConfig } from "./kubeconfig.ts";
import { TOKEN_REREAD_MS } from "./kube_credentials.ts";

const envOf = (vars: Record<string, string>) => (n: string) => vars[n];

async function listNames(opts: Parameters<typeof loadKubeConfig>[0] & object) {
  const { creds } = loadKubeConfig(opts);
  const res = await new ApiFetch(creds).get("/api/v1/nodes", {});
  const list = await res.json() as { items: { metadata?: { name?: string } }[] };
  return list.items.map((n) => n.metadata?.name);
}

/** A kubeconfig YAML with one context "c" (cluster "c", user "u"). */
function kubeconfig(cluster: string, user = "", extra = ""): string {
  const indent = (s: string) => s.split("\n").filter((l) => l).map((l) => `    ${l}`).join("\n");
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: c",
    "  cluster:",
    indent(cluster),
    "users:",
    "- name: u",
    "  user:" + (user ? "\n" + indent(user) : " {}"),
    "contexts:",
    "- name: c",
    "  context: {cluster: c, user: u}",
    extra || "current-context: c",
    "",
  ].join("\n");
}

Deno.test("--kubeconfig file is used and reaches the API server", async () => {
  const api = FakeApiServer.start();
  const path = api.writeKubeconfig();
  try {
    api.apply({ kind: "Node", metadata: { name: "n1" } });
    const r = loadKubeConfig({ kubeconfig: path, env: envOf({}) });
    assert.equal(r.source, "kubeconfig");
    assert.equal(r.server, api.url);
    assert.equal(r.creds.backend, "native", "plain http + token needs no client-node");
    assert.equal(r.clientNode, undefined);
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
    const r = loadKubeConfig({ kubeconfig: path, master: api.url + "/", env: envOf({}) });
    assert.equal(r.server, api.url);
    assert.deepEqual(await r.creds.headers(), { authorization: "Bearer fake-token" }, "kept");
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
    assert.deepEqual(await r.creds.headers(), {});
    assert.equal(await r.creds.httpClient(), null);
    assert.deepEqual(await listNames({ master: api.url, env: envOf({}) }), ["n3"]);
  } finally {
    await api.close();
  }
});

function serviceAccountDir(token: string, ca = "") {
  const dir = Deno.makeTempDirSync();
  const sa = `${dir}/var/run/secrets/kubernetes.io/serviceaccount`;
  Deno.mkdirSync(sa, { recursive: true });
  Deno.writeTextFileSync(`${sa}/token`, token);
  Deno.writeTextFileSync(`${sa}/ca.crt`, ca);
  return { dir, sa };
}

Deno.test("in-cluster config when KUBERNETES_SERVICE_HOST is set", async () => {
  const { dir } = serviceAccountDir("tok\n");
  const env = envOf({ KUBERNETES_SERVICE_HOST: "198.18.0.1", KUBERNETES_SERVICE_PORT: "6443" });
  try {
    const r = loadKubeConfig({ env, serviceAccountPrefix: dir });
    assert.equal(r.source, "in-cluster");
    assert.equal(r.server, "https://198.18.0.1:6443");
    assert.equal(r.creds.backend, "native");
    assert.deepEqual(await r.creds.headers(), { authorization: "Bearer tok" });
    // An empty ca.crt: system roots, with a warning (client-go logs and carries on).
    assert.match(r.warnings.join("\n"), /in-cluster CA .*ca\.crt unusable/);
    assert.throws(
      () => loadKubeConfig({ env, serviceAccountPrefix: `${dir}/nope` }),
      (e) => e instanceof KubeConfigError && /missing; pass --kubeconfig/.test(e.message),
    );
    assert.throws(
      () =>
        loadKubeConfig({
          env: envOf({ KUBERNETES_SERVICE_HOST: "198.18.0.1" }),
          serviceAccountPrefix: dir,
        }),
      (e) => e instanceof KubeConfigError && /KUBERNETES_SERVICE_PORT is not/.test(e.message),
    );
    // --kubeconfig wins over in-cluster.
    const api = FakeApiServer.start();
    const path = api.writeKubeconfig();
    try {
      assert.equal(loadKubeConfig({ kubeconfig: path, env }).source, "kubeconfig");
    } finally {
      Deno.removeSync(path);
      await api.close();
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("in-cluster: an IPv6 host is bracketed; the token is re-read once a minute", async () => {
  const { dir, sa } = serviceAccountDir(
    "first",
    Deno.readTextFileSync(
      new URL("../testdata/tls/ca.crt", import.meta.url),
    ),
  );
  let now = 1_000_000;
  const warned: string[] = [];
  try {
    const r = loadKubeConfig({
      env: envOf({ KUBERNETES_SERVICE_HOST: "fd00:10:96::1", KUBERNETES_SERVICE_PORT: "443" }),
      serviceAccountPrefix: dir,
      now: () => now,
      log: {
        warn: (m: string, f?: Record<string, unknown>) => warned.push(`${m} ${f?.err}`),
      } as never,
    });
    assert.equal(r.server, "https://[fd00:10:96::1]:443");
    assert.deepEqual(r.warnings, [], "a usable ca.crt");
    const bearer = async () => (await r.creds.headers()).authorization;
    assert.equal(await bearer(), "Bearer first");
    Deno.writeTextFileSync(`${sa}/token`, "second");
    now += TOKEN_REREAD_MS - 1;
    assert.equal(await bearer(), "Bearer first", "not re-read within a minute");
    now += 1;
    assert.equal(await bearer(), "Bearer second", "re-read after a minute");
    Deno.removeSync(`${sa}/token`);
    now += TOKEN_REREAD_MS;
    assert.equal(await bearer(), "Bearer second", "an unreadable file keeps the last token");
    assert.match(warned.join("\n"), /Cannot re-read the API token file.*No such file/);
  } finally {
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

Deno.test("$KUBECONFIG files merge first-wins; missing ones are skipped; paths per file", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${dir}/a`);
    Deno.mkdirSync(`${dir}/b`);
    Deno.writeTextFileSync(`${dir}/b/token`, "from-b-dir");
    // a: the current context and its cluster; a user "u" defined later too, ignored.
    Deno.writeTextFileSync(
      `${dir}/a/config`,
      [
        "clusters:",
        "- name: c",
        "  cluster: {server: 'http://198.18.0.10:8080/'}",
        "contexts:",
        "- name: c",
        "  context: {cluster: c, user: u}",
        "current-context: c",
      ].join("\n"),
    );
    Deno.writeTextFileSync(
      `${dir}/b/config`,
      kubeconfig("server: http://198.18.0.20", "tokenFile: token", "current-context: other"),
    );
    const env = envOf({
      KUBECONFIG: `${dir}/missing::${dir}/a/config:${dir}/b/config:${dir}/a/config`,
    });
    const r = loadKubeConfig({ env });
    assert.equal(r.server, "http://198.18.0.10:8080", "a's cluster and current-context win");
    assert.deepEqual(await r.creds.headers(), { authorization: "Bearer from-b-dir" });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("kubeconfig errors name the file and what is wrong", () => {
  const dir = Deno.makeTempDirSync();
  const check = (text: string, re: RegExp) => {
    Deno.writeTextFileSync(`${dir}/kc`, text);
    assert.throws(
      () => loadKubeConfig({ kubeconfig: `${dir}/kc`, env: envOf({}) }),
      (e) => e instanceof KubeConfigError && re.test(e.message) && e.message.includes(dir),
      re.source,
    );
  };
  try {
    check(kubeconfig("server: http://x", "", "#"), /no current-context is set.*: c$/);
    check(kubeconfig("server: http://x", "", "current-context: nope"), /"nope" names no/);
    check(
      kubeconfig("server: http://x").replace("cluster: c, user", "cluster: d, user"),
      /refers to cluster "d", which is not defined/,
    );
    check(
      kubeconfig("server: http://x").replace("user: u}", "user: v}"),
      /refers to user "v", which is not defined/,
    );
    check("clusters: [\n", /cannot load: not a valid kubeconfig/);
    check(kubeconfig("server: http://x") + "users: []\n", /cannot load: not a valid kubeconfig/);
    // Files a cluster or user names are read at once.
    Deno.writeTextFileSync(
      `${dir}/kc`,
      kubeconfig("server: https://x\ncertificate-authority: nope.crt"),
    );
    assert.throws(
      () => loadKubeConfig({ kubeconfig: `${dir}/kc`, env: envOf({}) }),
      (e) =>
        e instanceof KubeConfigError &&
        e.message.startsWith(`cannot read certificate-authority ${dir}/nope.crt`),
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
