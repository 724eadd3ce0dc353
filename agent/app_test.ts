import assert from "node:assert/strict";
import { runAgent } from "./app.ts";
import { parseArgs } from "./flags.ts";
import { FakeApiServer } from "../tests/fakeapi/server.ts";

Deno.test("bad flags exit 2 with a message naming the flag; --version exits 0", async () => {
  const errs: string[] = [];
  const orig = console.error;
  console.error = (m: string) => errs.push(m);
  try {
    assert.equal(await runAgent(["--sync-period=soon"]), 2);
    assert.equal(await runAgent(["--no-such-flag"]), 2);
  } finally {
    console.error = orig;
  }
  assert.match(errs[0], /--sync-period/);
  assert.match(errs[1], /--no-such-flag/);
  const out: string[] = [];
  const origLog = console.log;
  console.log = (m: string) => out.push(m);
  try {
    assert.equal(await runAgent(["--version"]), 0);
  } finally {
    console.log = origLog;
  }
  assert.match(out[0], /kube-nft-proxy v/);
});

Deno.test("an unusable kubeconfig is a clear error, not a crash", async () => {
  const lines: string[] = [];
  const sink = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
  assert.equal(await runAgent(["--kubeconfig=/nonexistent/kubeconfig", "--dry-run"], { sink }), 1);
  assert.ok(lines.some((l) => l.includes("/nonexistent/kubeconfig")), lines.join("\n"));
});

Deno.test("--write-config-to writes a KubeProxyConfiguration the agent reads back", async () => {
  const dir = Deno.makeTempDirSync();
  const lines: string[] = [];
  const sink = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
  try {
    const path = `${dir}/config.yaml`;
    const argv = ["--cluster-cidr=198.18.1.0/24", "--iptables-min-sync-period=250ms"];
    assert.equal(await runAgent([...argv, `--write-config-to=${path}`], { sink }), 0);
    const text = Deno.readTextFileSync(path);
    assert.match(text, /^kind: KubeProxyConfiguration$/m);
    const back = parseArgs([`--config=${path}`]);
    const direct = parseArgs(argv);
    assert.deepEqual(back.clusterCIDRs, direct.clusterCIDRs);
    assert.equal(back.minSyncPeriodMs, 250);
    assert.equal(back.syncPeriodMs, direct.syncPeriodMs);
    assert.equal(back.masqueradeBit, direct.masqueradeBit);
    assert.deepEqual(back.conntrack, direct.conntrack);
    // --init-only with --dry-run touches nothing and exits 0.
    assert.equal(await runAgent(["--init-only", "--dry-run"], { sink }), 0);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test({
  name: "a --config edit stops the agent with status 1, as upstream (dry run)",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const api = FakeApiServer.start();
    const dir = Deno.makeTempDirSync();
    const lines: string[] = [];
    const sink = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
    const quiet = console.log;
    console.log = () => {}; // the dry run's nft scripts
    try {
      api.apply({
        kind: "Node",
        metadata: { name: "node-a" },
        status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
      });
      const path = `${dir}/config.conf`;
      const conf = "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n" +
        "mode: nftables\nsyncPeriod: 30s\n";
      Deno.writeTextFileSync(path, conf);
      const done = runAgent([
        `--config=${path}`,
        `--kubeconfig=${api.writeKubeconfig(`${dir}/kubeconfig`)}`,
        "--hostname-override=node-a",
        "--dry-run",
      ], { sink });
      const until = async (re: RegExp) => {
        for (let i = 0; i < 200 && !lines.some((l) => re.test(l)); i++) {
          await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(lines.some((l) => re.test(l)), `no ${re}:\n${lines.join("\n")}`);
      };
      await until(/"Running"/);
      Deno.writeTextFileSync(path, conf.replace("30s", "20s"));
      assert.equal(await done, 1);
      await until(/The configuration file changed; exiting/);
      assert.ok(lines.some((l) => /rules stay in place/.test(l)));
    } finally {
      console.log = quiet;
      await api.close();
      Deno.removeSync(dir, { recursive: true });
    }
  },
});
