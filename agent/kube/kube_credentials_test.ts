import assert from "node:assert/strict";
import { FakeApiServer } from "../../tests/fakeapi/server.ts";
import { ApiFetch } from "./api_fetch.ts";
import { ClientNodeCredentials, NativeCredentials } from "./kube_credentials.ts";
import { KubeConfigError, kubeConfigFromString, loadKubeConfig } from "./kubeconfig.ts";
import { startTlsFront, TLS_FILES } from "../testdata/tls_front.ts";

const b64 = (s: string) => btoa(s);
const read = (p: string) => Deno.readTextFileSync(p);

/** A kubeconfig YAML with one context (cluster and user fields as YAML lines). */
function kubeconfig(cluster: string[], user: string[] = []): string {
  return [
    "clusters:",
    "- name: c",
    "  cluster:",
    ...cluster.map((l) => `    ${l}`),
    "users:",
    "- name: u",
    user.length ? "  user:" : "  user: {}",
    ...user.map((l) => `    ${l}`),
    "contexts:",
    "- name: c",
    "  context: {cluster: c, user: u}",
    "current-context: c",
    "",
  ].join("\n");
}

async function nodeNames(api: ApiFetch): Promise<string[]> {
  const res = await api.get("/api/v1/nodes", {});
  if (res.status !== 200) throw await ApiFetch.statusError(res);
  const list = await res.json() as { items: { metadata: { name: string } }[] };
  return list.items.map((n) => n.metadata.name);
}

Deno.test("credentials: token, basic auth, and token over basic", async () => {
  const h = (user: string[]) => kubeConfigFromString(kubeconfig(["server: http://x"], user)).creds;
  assert.deepEqual(await h(["token: abc"]).headers(), { authorization: "Bearer abc" });
  assert.deepEqual(await h(["username: ü", "password: p:w"]).headers(), {
    authorization: `Basic ${btoa("\xc3\xbc:p:w")}`, // UTF-8 bytes, as Go sends them
  });
  assert.deepEqual(await h(["token: abc", "username: a", "password: b"]).headers(), {
    authorization: "Bearer abc",
  });
  assert.deepEqual(await h([]).headers(), {});
});

Deno.test("credentials: tokenFile (relative) wins over token; an unreadable one falls back", async () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${dir}/sub`);
    Deno.writeTextFileSync(`${dir}/sub/tok`, " from-file\n");
    Deno.writeTextFileSync(
      `${dir}/kc`,
      kubeconfig(["server: http://x"], ["token: static", "tokenFile: sub/tok"]),
    );
    const r = loadKubeConfig({ kubeconfig: `${dir}/kc`, env: () => undefined });
    assert.deepEqual(await r.creds.headers(), { authorization: "Bearer from-file" });
    const text = kubeconfig(["server: http://x"], ["token: static", "tokenFile: nope"]);
    const s = kubeConfigFromString(text, { dir });
    assert.deepEqual(await s.creds.headers(), { authorization: "Bearer static" });
    assert.throws(
      () => kubeConfigFromString(kubeconfig(["server: http://x"], ["tokenFile: nope"]), { dir }),
      (e) => e instanceof KubeConfigError && e.message.includes(`tokenFile ${dir}/nope`),
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("credentials: CA and client certificate from files (relative) or data", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.mkdirSync(`${dir}/pki`);
    Deno.copyFileSync(TLS_FILES.ca, `${dir}/pki/ca.crt`);
    Deno.copyFileSync(TLS_FILES.clientCert, `${dir}/pki/client.crt`);
    Deno.copyFileSync(TLS_FILES.clientKey, `${dir}/pki/client.key`);
    const want = {
      ca: read(TLS_FILES.ca),
      cert: read(TLS_FILES.clientCert),
      key: read(TLS_FILES.clientKey),
    };
    Deno.writeTextFileSync(
      `${dir}/kubeconfig`,
      kubeconfig(["server: https://127.0.0.1", "certificate-authority: pki/ca.crt"], [
        "client-certificate: ./pki/client.crt",
        "client-key: pki/../pki/client.key",
      ]),
    );
    const files = loadKubeConfig({ kubeconfig: `${dir}/kubeconfig`, env: () => undefined });
    assert.ok(files.creds instanceof NativeCredentials);
    assert.deepEqual(files.creds.tls, want);
    // *-data wins over the file, as in client-go.
    const data = kubeConfigFromString(
      kubeconfig([
        "server: https://127.0.0.1",
        `certificate-authority-data: ${b64(want.ca)}`,
        "certificate-authority: /nonexistent",
      ], [
        `client-certificate-data: ${b64(want.cert)}`,
        `client-key-data: ${b64(want.key)}`,
      ]),
    );
    assert.ok(data.creds instanceof NativeCredentials);
    assert.deepEqual(data.creds.tls, want);
    assert.throws(
      () =>
        kubeConfigFromString(
          kubeconfig(["server: https://x"], [`client-certificate-data: ${b64(want.cert)}`]),
        ),
      /client-certificate and client-key must both be set/,
    );
    assert.throws(
      () =>
        kubeConfigFromString(kubeconfig(["server: https://x", "certificate-authority-data: '!!'"])),
      /certificate-authority-data is not valid base64/,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("https with a CA and a token reaches the server over Deno's fetch", async () => {
  const api = FakeApiServer.start();
  const front = startTlsFront(api, { token: "sekret" });
  try {
    api.apply({ kind: "Node", metadata: { name: "n1" } });
    const cfg = (ca: string[], token = "sekret") =>
      kubeConfigFromString(
        kubeconfig([`server: ${front.url}`, ...ca], [
          `token: ${token}`,
          `client-certificate: ${TLS_FILES.clientCert}`,
          `client-key: ${TLS_FILES.clientKey}`,
        ]),
      );
    const r = cfg([`certificate-authority: ${TLS_FILES.ca}`]);
    assert.equal(r.creds.backend, "native");
    assert.deepEqual(await nodeNames(new ApiFetch(r.creds)), ["n1"]);
    assert.equal(front.auth.at(-1), "Bearer sekret");
    const data = cfg([`certificate-authority-data: ${b64(read(TLS_FILES.ca))}`]);
    assert.deepEqual(await nodeNames(new ApiFetch(data.creds)), ["n1"]);
    await assert.rejects(
      nodeNames(new ApiFetch(cfg([]).creds)),
      (e: Error) => /UnknownIssuer/.test(String(e.cause)),
      "without the CA the certificate is not trusted",
    );
    await assert.rejects(
      nodeNames(new ApiFetch(cfg([`certificate-authority: ${TLS_FILES.ca}`], "wrong").creds)),
      (e: { statusCode?: number }) => e.statusCode === 401,
    );
  } finally {
    await api.close();
    await front.close();
  }
});

Deno.test("exec and auth-provider users go through client-node; so does https without verification", async () => {
  const exec = kubeConfigFromString(
    kubeconfig(["server: http://x"], [
      "exec:",
      "  apiVersion: client.authentication.k8s.io/v1",
      "  command: ./bin/plugin",
    ]),
    { dir: "/etc/kube" },
  );
  assert.ok(exec.creds instanceof ClientNodeCredentials);
  assert.match(exec.clientNode!, /user "u" has an exec credential plugin/);
  assert.equal(exec.creds.nativeFetch, true, "lists and watches still use Deno's fetch");
  const kc = await exec.creds.clientNodeConfig();
  assert.equal(kc.getCurrentUser()?.exec.command, "/etc/kube/bin/plugin", "a path is resolved");
  const provider = kubeConfigFromString(kubeconfig(["server: http://x"], [
    "auth-provider: {name: oidc, config: {}}",
  ]));
  assert.match(provider.clientNode!, /auth-provider "oidc"/);
  const insecure = kubeConfigFromString(
    kubeconfig(["server: https://x", "insecure-skip-tls-verify: true"], ["token: t"]),
  );
  assert.match(insecure.clientNode!, /insecure-skip-tls-verify/);
  assert.equal(insecure.creds.nativeFetch, false);
  assert.equal(await new ApiFetch(insecure.creds).usable(), false);
  // Plain http ignores insecure-skip-tls-verify (the fake API server's kubeconfig has it).
  const http = kubeConfigFromString(
    kubeconfig(["server: http://x", "insecure-skip-tls-verify: true"], ["token: t"]),
  );
  assert.equal(http.creds.backend, "native");
  const sni = kubeConfigFromString(kubeconfig(["server: https://10.0.0.1", "tls-server-name: k"]));
  assert.match(sni.warnings.join("\n"), /tls-server-name "k" is ignored.*valid for 10\.0\.0\.1/);
});

Deno.test("an exec plugin's token and the CA reach an https server (client-node credentials)", async () => {
  const api = FakeApiServer.start();
  const front = startTlsFront(api, { token: "from-exec" });
  try {
    api.apply({ kind: "Node", metadata: { name: "n1" } });
    const credential = JSON.stringify({
      apiVersion: "client.authentication.k8s.io/v1",
      kind: "ExecCredential",
      status: { token: "from-exec" },
    });
    const r = kubeConfigFromString(
      kubeconfig([`server: ${front.url}`, `certificate-authority: ${TLS_FILES.ca}`], [
        "exec:",
        "  apiVersion: client.authentication.k8s.io/v1",
        "  command: /bin/sh",
        `  args: ["-c", ${JSON.stringify(`echo '${credential}'`)}]`,
        "  interactiveMode: Never",
      ]),
    );
    assert.equal(r.creds.backend, "client-node");
    assert.deepEqual(await nodeNames(new ApiFetch(r.creds)), ["n1"]);
    assert.equal(front.auth.at(-1), "Bearer from-exec");
  } finally {
    await api.close();
    await front.close();
  }
});
