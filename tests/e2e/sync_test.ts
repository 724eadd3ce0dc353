/**
 * Real-kernel tests of the sync engine: restart adoption without a traffic
 * gap (of our own table, of upstream kube-proxy 1.34's, and of the previous
 * layout's), and repair after the table is deleted behind our back.
 *
 * Topology (all in namespaces this test creates): client 198.18.100.2 ->
 * node (198.18.100.1 | 198.18.101.1, forwarding, runs the proxier) -> pod
 * 198.18.101.2:8080. ClusterIP 198.18.200.10:80 -> the pod.
 *
 * The proxier runs in child processes inside the node namespace: this file
 * doubles as the child script (`deno run -A tests/e2e/sync_test.ts proxier
 * ...`; Deno.test is a no-op under `deno run`).
 *
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, link, Netns, repoRoot, withNetns } from "../netns.ts";

const SELF = `${repoRoot}/tests/e2e/sync_test.ts`;
const CLUSTER_IP = "198.18.200.10";
const POD_IP = "198.18.101.2";
const NODE_IP = "198.18.101.1";

const SERVER = `
const l = Deno.listen({ hostname: "0.0.0.0", port: 8080 });
console.log("listening");
for await (const c of l) c.write(new TextEncoder().encode("ok")).finally(() => c.close());
`;

/** Connects in a loop for `ms`, printing {ok, fail, firstFailAt} as JSON at the end. */
const CLIENT = `
const [host, port, ms] = Deno.args;
const end = Date.now() + Number(ms);
let ok = 0, fail = 0; const fails = [];
while (Date.now() < end) {
  const t = Date.now();
  try {
    const conn = await Promise.race([
      Deno.connect({ hostname: host, port: Number(port) }),
      new Promise((_, rej) => setTimeout(() => rej(new Error("connect timeout")), 1000)),
    ]);
    const buf = new Uint8Array(8);
    const n = await Promise.race([conn.read(buf),
      new Promise((_, rej) => setTimeout(() => rej(new Error("read timeout")), 1000))]);
    conn.close();
    if (new TextDecoder().decode(buf.subarray(0, n ?? 0)) === "ok") ok++; else { fail++; fails.push(t); }
  } catch (e) { fail++; if (fails.length < 5) fails.push(String(e)); }
  await new Promise((r) => setTimeout(r, 5));
}
console.log(JSON.stringify({ ok, fail, fails }));
Deno.exit(0); // a connect still retrying SYNs must not keep us alive
`;

async function topology(client: Netns, node: Netns, pod: Netns): Promise<void> {
  await link(client, "eth0", node, "c0");
  await link(pod, "eth0", node, "p0");
  await client.exec(["ip", "addr", "add", "198.18.100.2/24", "dev", "eth0"]);
  await client.exec(["ip", "route", "add", "198.18.200.0/24", "via", "198.18.100.1"]);
  await node.exec(["ip", "addr", "add", "198.18.100.1/24", "dev", "c0"]);
  await node.exec(["ip", "addr", "add", `${NODE_IP}/24`, "dev", "p0"]);
  await node.exec(["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
  await pod.exec(["ip", "addr", "add", `${POD_IP}/24`, "dev", "eth0"]);
  await pod.exec(["ip", "route", "add", "default", "via", NODE_IP]);
}

async function startServer(pod: Netns): Promise<Deno.ChildProcess> {
  const p = pod.spawn([denoBin, "eval", SERVER], { stderr: "inherit" });
  const reader = p.stdout.getReader();
  const { value } = await reader.read();
  assert.match(new TextDecoder().decode(value), /listening/);
  reader.releaseLock();
  return p;
}

function proxierChild(node: Netns, args: string[]): Deno.ChildProcess {
  return node.spawn(
    ["env", "KNP_IN_TEST_NETNS=1", denoBin, "run", "-A", SELF, "proxier", ...args],
    {
      stderr: "inherit",
    },
  );
}

async function finish(p: Deno.ChildProcess): Promise<Record<string, unknown>[]> {
  const out = await p.output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, `proxier child failed: ${text}`);
  return text.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
}

async function connectOnce(client: Netns): Promise<boolean> {
  const r = await client.exec([denoBin, "eval", CLIENT, CLUSTER_IP, "80", "300"], { check: false });
  const res = JSON.parse(r.stdout.trim().split("\n").at(-1) ?? "{}");
  return res.ok > 0 && res.fail === 0;
}

e2eTest("sync e2e: a restarted proxier adopts the table with no traffic gap", async () => {
  await withNetns(3, async (client, node, pod) => {
    await topology(client, node, pod);
    const server = await startServer(pod);
    try {
      // First proxier: cold start with 1000 filler services, then exits.
      const first = await finish(proxierChild(node, ["--filler", "1000", "--syncs", "1"]));
      assert.equal(first[0].full, true);
      assert.ok(await connectOnce(client), "service reachable after the cold start");
      // Client hammers the ClusterIP while a second proxier adopts the table
      // (with a different filler set, so chains are rewritten, added and removed).
      const loop = client.spawn([denoBin, "eval", CLIENT, CLUSTER_IP, "80", "6000"], {
        stderr: "inherit",
      });
      await new Promise((r) => setTimeout(r, 1000));
      const second = await finish(
        proxierChild(node, ["--filler", "1200", "--filler-offset", "500", "--syncs", "3"]),
      );
      const out = await loop.output();
      const res = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
      console.log(`adoption: ${JSON.stringify(second)}; client ${JSON.stringify(res)}`);
      assert.equal(second[0].full, true);
      assert.ok(res.ok > 50, `client made too few connections: ${JSON.stringify(res)}`);
      assert.equal(res.fail, 0, `connections failed during adoption: ${JSON.stringify(res)}`);
      // Chains of the 500 filler services that went away were flushed and later deleted.
      const chains = await node.exec(["nft", "list", "chains", "ip"]);
      assert.doesNotMatch(chains.stdout, /ns\d+\/svc(\d|[1-4]\d\d)\/tcp\/p\b/);
      assert.ok(second.some((r) => (r.deletedChains as number) > 0), "stale chains deleted");
    } finally {
      server.kill();
      await server.output();
    }
  });
});

for (const layout of ["upstream", "previous"] as const) {
  e2eTest(`sync e2e: a table of the ${layout} layout is adopted with no traffic gap`, async () => {
    await withNetns(3, async (client, node, pod) => {
      await topology(client, node, pod);
      const server = await startServer(pod);
      try {
        const svc = ["--filler", "300", "--sticky-every", "7"];
        await finish(proxierChild(node, [...svc, "--preload", layout, "--preload-only"]));
        assert.ok(await connectOnce(client), `service reachable through the ${layout} layout`);
        const loop = client.spawn([denoBin, "eval", CLIENT, CLUSTER_IP, "80", "5000"], {
          stderr: "inherit",
        });
        await new Promise((r) => setTimeout(r, 1000));
        // Small transactions: the adoption takes several, a service at a time.
        const syncs = await finish(
          proxierChild(node, [...svc, "--syncs", "3", "--max-ops", "400"]),
        );
        const out = await loop.output();
        const res = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
        console.log(`${layout} adoption: ${JSON.stringify(syncs)}; client ${JSON.stringify(res)}`);
        assert.ok((syncs[0].txs as number) > 2, "the adoption ran in several transactions");
        assert.ok(res.ok > 50, `client made too few connections: ${JSON.stringify(res)}`);
        assert.equal(res.fail, 0, `connections failed during adoption: ${JSON.stringify(res)}`);
        const table = (await node.exec(["nft", "list", "table", "ip", "kube-proxy"])).stdout;
        assert.doesNotMatch(table, /chain (endpoint-|mark-for-masquerade)/, "old chains are gone");
        const check = /chain cluster-ips-check \{([^}]*)\}/.exec(table)![1];
        assert.doesNotMatch(check, /\{/, "no anonymous set is left in cluster-ips-check");
        assert.match(table, /goto dnat-tcp-2/, "services now use the shared class chains");
      } finally {
        server.kill();
        await server.output();
      }
    });
  });
}

e2eTest("sync e2e: the next full sync repairs a deleted table", async () => {
  await withNetns(3, async (client, node, pod) => {
    await topology(client, node, pod);
    const server = await startServer(pod);
    const px = proxierChild(node, [
      "--filler",
      "200",
      "--loop-ms",
      "9000",
      "--full-every-ms",
      "1000",
    ]);
    try {
      let up = false;
      for (let i = 0; i < 30 && !up; i++) {
        up = await connectOnce(client);
        if (!up) await new Promise((r) => setTimeout(r, 200));
      }
      assert.ok(up, "service reachable once the proxier synced");
      await node.exec(["nft", "delete", "table", "ip", "kube-proxy"]);
      // Not asserted: a full sync runs every second and may already have repaired it.
      const downRightAfter = !(await connectOnce(client));
      console.log(`service down right after the deletion: ${downRightAfter}`);
      let back = false;
      const t0 = Date.now();
      while (!back && Date.now() - t0 < 5000) back = await connectOnce(client);
      assert.ok(back, "the next full sync restored the service");
    } finally {
      const lines = await finish(px);
      // The cold start and the repair both write the table; no-change full syncs write nothing.
      const writing = lines.filter((l) => l.full && (l.ops as number) > 0);
      assert.ok(writing.length >= 2, `a full sync rebuilt the table: ${JSON.stringify(lines)}`);
      server.kill();
      await server.output();
    }
  });
});

/** The synthetic module the child builds its state from (loaded only in the child). */
type Synth = typeof import("../support/synthetic.ts");
/** The proxier's input the child syncs (one shape for every sync). */
type ChildState = ReturnType<Synth["syntheticState"]>;

/** Reads `--name N` from the child's arguments, or `def`. */
function numArg(args: string[], name: string, def: number): number {
  const i = args.indexOf(`--${name}`);
  return i < 0 ? def : Number(args[i + 1]);
}

/** The state: `--filler` services from `--filler-offset`, every `--sticky-every`th sticky, and the test Service. */
function childState(synth: Synth, args: string[]): ChildState {
  const filler = numArg(args, "filler", 0);
  const offset = numArg(args, "filler-offset", 0);
  const state = synth.syntheticState({ services: 0, endpointsPerService: 2 });
  const o = { services: filler, endpointsPerService: 2 };
  for (let i = offset; i < offset + filler; i++) {
    const s = synth.syntheticService(i, o);
    state.services.set(s.id, s);
    state.endpoints.set(s.id, synth.syntheticEndpoints(i, o));
  }
  const stickyEvery = numArg(args, "sticky-every", 0);
  if (stickyEvery > 0) {
    for (const [i, svc] of [...state.services.values()].entries()) {
      if (i % stickyEvery === 0) svc.stickyMaxAgeSeconds = 600;
    }
  }
  const test = synth.syntheticService(60_000, o);
  test.id = "e2e/web:http";
  test.namespace = "e2e";
  test.name = "web";
  test.portName = "http";
  test.protocol = "TCP";
  test.clusterIP = CLUSTER_IP;
  test.port = 80;
  test.nodePort = 0;
  state.services.set(test.id, test);
  state.endpoints.set(test.id, [{
    ip: POD_IP,
    port: 8080,
    ready: true,
    serving: true,
    terminating: false,
    isLocal: true,
    nodeName: "node0",
  }]);
  state.node.ips = [NODE_IP];
  // ServiceCIDRs must not cover the pod/node/client addresses (cluster-ips-check drops them).
  state.serviceCIDRs = ["198.18.0.0/20", "198.18.200.0/24"];
  return state;
}

/** `--preload upstream|previous`: loads that layout's table for `state` with nft. */
async function preloadTable(synth: Synth, state: ChildState, layout: string): Promise<void> {
  const legacy = await import("./fixtures/legacy_tables.ts");
  const podCIDR = synth.syntheticConfig().localDetector;
  const cidr = podCIDR.mode === "ClusterCIDR" ? podCIDR.cidrs[0] : "198.19.0.0/16";
  const script = layout === "upstream"
    ? legacy.upstreamScript(state, cidr)
    : legacy.previousScript(state, cidr);
  const nft = new Deno.Command("nft", { args: ["-f", "-"], stdin: "piped" }).spawn();
  const w = nft.stdin.getWriter();
  await w.write(new TextEncoder().encode(script));
  await w.close();
  const st = await nft.status;
  if (!st.success) throw new Error(`loading the ${layout} table failed`);
}

/** Syncs `state` for `--loop-ms`, or `--syncs` times, printing each result as a JSON line. */
async function runSyncs(synth: Synth, state: ChildState, args: string[]): Promise<void> {
  const { openNftables } = await import("../../ffi/nftables/client.ts");
  const { Proxier } = await import("../../proxier/nftables/proxier.ts");
  const p = new Proxier({
    client: openNftables("ip", "kube-proxy"),
    config: synth.syntheticConfig(),
    maxOpsPerTransaction: numArg(args, "max-ops", 50_000),
  });
  // The periodic full sync's clock is the engine's (agent/engine.ts); this driver stands in.
  const fullEvery = numArg(args, "full-every-ms", 3_600_000);
  let lastFull = Date.now();
  const once = async () => {
    if (Date.now() - lastFull >= fullEvery) {
      lastFull = Date.now();
      p.requestFullSync("periodic check against the kernel");
    }
    const r = await p.sync({
      state,
      changed: new Set(),
      deleted: new Set(),
      stale: synth.noStale(),
    });
    console.log(JSON.stringify({ ...r, stale: undefined }));
    return r!;
  };
  const loopMs = numArg(args, "loop-ms", 0);
  if (loopMs > 0) {
    const end = Date.now() + loopMs;
    while (Date.now() < end) {
      await once();
      await new Promise((r) => setTimeout(r, 200));
    }
    return;
  }
  const syncs = numArg(args, "syncs", 1);
  for (let i = 0; i < syncs; i++) {
    const r = await once();
    if (i + 1 < syncs) await new Promise((res) => setTimeout(res, (r.followUpMs ?? 0) + 100));
  }
}

/** Child: runs a proxier in the current (test) namespace. */
async function child(args: string[]): Promise<void> {
  if (Deno.env.get("KNP_IN_TEST_NETNS") !== "1") {
    throw new Error("sync_test child: refusing to run outside a test namespace");
  }
  const synth = await import("../support/synthetic.ts");
  const state = childState(synth, args);
  if (args.includes("--preload")) {
    await preloadTable(synth, state, args[args.indexOf("--preload") + 1]);
    if (args.includes("--preload-only")) return;
  }
  await runSyncs(synth, state, args);
}

if (import.meta.main && Deno.args[0] === "proxier") await child(Deno.args.slice(1));
