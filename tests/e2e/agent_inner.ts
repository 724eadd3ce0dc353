/**
 * Whole-agent e2e, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/agent_test.ts (`deno test -A tests/e2e/agent_inner.ts`, env KNP_TOPO = the topology's
 * namespace names as JSON; pods 0 and 1 run echo servers "a" and "b" on TCP 8080 / UDP 5353).
 *
 * It serves a cluster from the fake API server on 127.0.0.1, starts the real agent the way
 * `deno task start` does, and proves with real traffic from the client namespace (and from the
 * node) that API changes reach the kernel, that an API outage with compaction is survived, that
 * health/metrics behave, that bad objects are skipped, and that SIGTERM and --cleanup do what
 * kube-proxy does. Not a *_test.ts file on purpose: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import type { FakeApiServer, KObject } from "../fakeapi/server.ts";
import { MIXIN_SELECTORS, parseExposition, select } from "../mixin_selectors.ts";
import { run } from "../netns.ts";
import { NODE4, NODE6, type ProbeResult } from "../topology.ts";
import { AgentProcess, eventually, httpGet } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import {
  attachTopology,
  metric,
  nftTable,
  NODE_NAME,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

// ---------------------------------------------------------------------------------------------
// Cluster objects

function node(taints: { key: string; effect: string }[] = []): KObject {
  return {
    kind: "Node",
    metadata: { name: NODE_NAME, labels: { "kubernetes.io/hostname": NODE_NAME } },
    spec: { podCIDRs: ["198.18.1.0/24", "2001:db8:1::/64"], taints },
    status: {
      addresses: [
        { type: "InternalIP", address: NODE4 },
        { type: "InternalIP", address: NODE6 },
        { type: "Hostname", address: NODE_NAME },
      ],
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Helpers

const topo = attachTopology("tests/e2e/agent_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);

/** Labels of the replies; undefined when any attempt failed. */
function labelsOf(rs: ProbeResult[]): string[] | undefined {
  if (!rs.every((r) => "reply" in r)) return undefined;
  return rs.map((r) => ("reply" in r ? r.reply.split(" ")[0] : ""));
}

/** Waits until `count` TCP/UDP attempts to host:port all answer, from exactly `expect` labels. */
function reaches(
  from: "client" | "node",
  proto: "tcp" | "udp",
  host: string,
  port: number,
  expect: string[],
  timeoutMs = 15_000,
): Promise<string[]> {
  const ns = from === "client" ? topo.client : topo.node;
  return eventually(
    `${from} -> ${proto} ${host}:${port} reaching ${expect}`,
    async () => {
      const labels = labelsOf(await topo.request(ns, proto, host, port, 12, 1500));
      if (!labels) return undefined;
      const seen = [...new Set(labels)].sort();
      return JSON.stringify(seen) === JSON.stringify([...expect].sort()) ? labels : undefined;
    },
    timeoutMs,
    200,
  );
}

/** Waits until a single attempt fails with `error` (any error when omitted). */
function fails(
  host: string,
  port: number,
  error?: string,
  timeoutMs = 15_000,
): Promise<{ error: string; ms: number }> {
  return eventually(
    `client -> tcp ${host}:${port} failing (${error ?? "any error"})`,
    async () => {
      const [r] = await topo.request(topo.client, "tcp", host, port, 1, 1000);
      if ("error" in r && (error === undefined || r.error === error)) return r;
      return undefined;
    },
    timeoutMs,
    200,
  );
}

/** A list request (not a watch, not the /version probe). */
function isList(path: string): boolean {
  return path.startsWith("/api") && !/[?&]watch=/.test(path);
}

/** How many list requests the fake API server has answered. */
function listRequests(api: FakeApiServer): number {
  return api.requests.filter(isList).length;
}

// ---------------------------------------------------------------------------------------------

/** What the steps share: the agent under test (replaced when a step restarts it) and its servers. */
interface Ctx {
  aut: ReturnType<typeof startAgent>;
  api: FakeApiServer;
  healthz: string;
  metricsUrl: string;
  agent: ReturnType<typeof startAgent>["agent"];
}

/** The agent starts, programs the initial list and what the API adds, skips malformed Services, reports health and posts its Event. */
async function startupSteps(t: Deno.TestContext, c: Ctx): Promise<void> {
  const { aut, api, healthz, agent } = c;
  await t.step("the agent starts and /healthz turns 200", () => aut.healthy());

  await t.step("Services from the initial list are programmed (client and node)", async () => {
    await reaches("client", "tcp", "198.19.0.10", 80, ["a", "b"]);
    await reaches("client", "udp", "198.19.0.53", 53, ["a", "b"]);
    await reaches("client", "tcp", NODE4, 30080, ["a", "b"]);
    await reaches("client", "tcp", "2001:db8:ffff::10", 80, ["a", "b"]);
    await reaches("node", "tcp", "198.19.0.10", 80, ["a", "b"]);
  });

  await t.step("a Service created through the API is programmed", async () => {
    api.apply(service("api", { ip: "198.19.0.20" }));
    api.apply(slice("api", [A]));
    await reaches("client", "tcp", "198.19.0.20", 80, ["a"]);
  });

  await t.step("malformed Services are logged by name and skipped", async () => {
    await agent.waitForLine((l) => l.stream === "stderr" && l.text.includes("default/bad-ip"));
    await agent.waitForLine((l) => l.stream === "stderr" && l.text.includes("default/bad-port"));
    const table = await nftTable("ip");
    assert.ok(table, "ip kube-proxy table missing");
    assert.ok(!table.includes("198.19.0.99"), "bad-port service was programmed");
    assert.ok(!table.includes("198.19.0.300"), "bad-ip service was programmed");
    assert.ok(table.includes("198.19.0.10"), "web service missing from the table");
  });

  await t.step("/healthz and /livez: JSON shape, 503 when tainted for deletion", async () => {
    const h = await httpGet(`${healthz}/healthz`);
    assert.equal(h.status, 200, h.body);
    const body = JSON.parse(h.body);
    assert.deepEqual(
      Object.keys(body),
      ["lastUpdated", "currentTime", "nodeEligible", "healthy", "status"],
    );
    assert.equal(body.nodeEligible, true);
    assert.equal(body.healthy, true);
    assert.ok(!Number.isNaN(Date.parse(body.lastUpdated)), body.lastUpdated);
    assert.equal(body.status.IPv4.healthy, true);
    assert.equal(body.status.IPv6.healthy, true);
    const lz = await httpGet(`${healthz}/livez`);
    assert.equal(lz.status, 200, lz.body);
    assert.equal(JSON.parse(lz.body).nodeEligible, undefined, "/livez has no nodeEligible");

    api.apply(node([{ key: "ToBeDeletedByClusterAutoscaler", effect: "NoSchedule" }]));
    const tainted = await eventually("/healthz 503 when tainted", async () => {
      const r = await httpGet(`${healthz}/healthz`);
      return r.status === 503 ? r : undefined;
    });
    assert.equal(JSON.parse(tainted.body).nodeEligible, false);
    assert.equal((await httpGet(`${healthz}/livez`)).status, 200, "/livez must stay 200");
    api.apply(node());
    await eventually("/healthz 200 after the taint is removed", async () => {
      return (await httpGet(`${healthz}/healthz`)).status === 200 ? true : undefined;
    });
  });

  await t.step("the start-up Event is recorded for this Node, as upstream's", () => {
    const ev = api.events.find((e) => e.reason === "Starting");
    assert.ok(ev, `no Starting event: ${JSON.stringify(api.events)}`);
    assert.equal(ev.action, "StartKubeProxy");
    assert.deepEqual(ev.regarding, { kind: "Node", name: NODE_NAME, uid: NODE_NAME });
    assert.equal(ev.metadata?.namespace, "default");
  });
}

/** The metrics port's pages and metrics, then endpoint, port and Service changes reach the kernel. */
async function serverSteps(t: Deno.TestContext, c: Ctx): Promise<void> {
  const { api, metricsUrl } = c;
  await t.step("the metrics port serves /proxyMode, /healthz and /configz", async () => {
    const base = metricsUrl.replace(/\/metrics$/, "");
    assert.deepEqual(await httpGet(`${base}/proxyMode`), { status: 200, body: "nftables" });
    assert.deepEqual(await httpGet(`${base}/healthz`), { status: 200, body: "ok" });
    const cz = await httpGet(`${base}/configz`);
    assert.equal(cz.status, 200);
    // Upstream's internal configuration, with Go's field names.
    const c = JSON.parse(cz.body)["kubeproxy.config.k8s.io"];
    assert.equal(c.Mode, "nftables");
    assert.equal(c.HostnameOverride, NODE_NAME);
    assert.deepEqual(c.DetectLocal.ClusterCIDRs, ["198.18.1.0/24", "2001:db8:1::/64"]);
    assert.equal(c.SyncPeriod, "2s");
  });

  let syncs0 = 0;
  await t.step("/metrics exposes kube-proxy metrics", async () => {
    const r = await httpGet(metricsUrl);
    assert.equal(r.status, 200);
    for (
      const name of [
        "kubeproxy_sync_proxy_rules_duration_seconds_bucket",
        "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
        "kubeproxy_sync_proxy_rules_endpoint_changes_total",
        "kubeproxy_sync_proxy_rules_service_changes_total",
        "# TYPE kubeproxy_network_programming_duration_seconds histogram",
      ]
    ) assert.ok(r.body.includes(name), `${name} missing from /metrics`);
    syncs0 = metric(
      r.body,
      "kubeproxy_sync_proxy_rules_duration_seconds_count",
      'ip_family="IPv4"',
    ) ?? 0;
    assert.ok(syncs0 > 0, "no IPv4 sync counted yet");
  });

  await t.step("changed endpoints are reprogrammed and counted", async () => {
    const m0 = (await httpGet(metricsUrl)).body;
    const ep0 = metric(m0, "kubeproxy_sync_proxy_rules_endpoint_changes_total") ?? 0;
    const npl = "kubeproxy_network_programming_duration_seconds_count";
    const np0 = metric(m0, npl, 'ip_family="IPv4"') ?? 0;
    api.apply(slice("web", [B], "TCP", new Date()));
    await reaches("client", "tcp", "198.19.0.10", 80, ["b"]);
    const m = (await httpGet(metricsUrl)).body;
    const np1 = metric(m, npl, 'ip_family="IPv4"') ?? 0;
    assert.ok(np1 > np0, `network programming latency not observed: ${np0} -> ${np1}`);
    const syncs1 = metric(
      m,
      "kubeproxy_sync_proxy_rules_duration_seconds_count",
      'ip_family="IPv4"',
    ) ?? 0;
    assert.ok(syncs1 > syncs0, `sync count did not move: ${syncs0} -> ${syncs1}`);
    const ep1 = metric(m, "kubeproxy_sync_proxy_rules_endpoint_changes_total") ?? 0;
    assert.ok(ep1 > ep0, `endpoint changes did not move: ${ep0} -> ${ep1}`);
  });

  await t.step("a changed port is reprogrammed; the old port is refused", async () => {
    api.apply(service("web", { ip: "198.19.0.10", port: 81, nodePort: 30080 }));
    await reaches("client", "tcp", "198.19.0.10", 81, ["b"]);
    await fails("198.19.0.10", 80, "ConnectionRefused");
  });

  await t.step("a deleted Service is removed from the kernel", async () => {
    api.remove("Service", "default", "web");
    api.remove("EndpointSlice", "default", "web-s1");
    await eventually("198.19.0.10 gone from the table", async () => {
      const table = await nftTable("ip");
      return table !== undefined && !table.includes("198.19.0.10") ? true : undefined;
    });
    await fails("198.19.0.10", 81);
    await fails(NODE4, 30080);
    // The rest is untouched.
    await reaches("client", "udp", "198.19.0.53", 53, ["a", "b"]);
  });
}

/** API server outages and a watch resumed past compaction. */
async function apiSteps(t: Deno.TestContext, c: Ctx): Promise<void> {
  const { api, healthz } = c;
  await t.step(
    "API server restart: rules keep working, changes made meanwhile land",
    async () => {
      const lists0 = listRequests(api);
      // A kube-apiserver shutting down ends its watch streams, then stops listening.
      api.dropWatches();
      await api.down();
      await reaches("client", "tcp", "198.19.0.20", 80, ["a"]);
      await reaches("client", "udp", "198.19.0.53", 53, ["a", "b"]);
      api.apply(service("during", { ip: "198.19.0.30" }));
      api.apply(slice("during", [A, B]));
      api.remove("Service", "default", "api");
      api.remove("EndpointSlice", "default", "api-s1");
      api.compact();
      // Long enough for the health timeout (2 x --sync-period): /healthz reports the dead
      // watches. Each watch times out on its own clock, so wait until services is among them.
      await eventually(
        "/healthz 503 naming the services watch as down",
        async () => {
          const r = await httpGet(`${healthz}/healthz`);
          const down: unknown = r.status === 503 ? JSON.parse(r.body).watchesDown : undefined;
          return Array.isArray(down) && down.includes("services") ? r : undefined;
        },
        15_000,
        250,
      );
      assert.equal((await httpGet(`${healthz}/livez`)).status, 200, "/livez must stay 200");
      await reaches("client", "tcp", "198.19.0.20", 80, ["a"]);
      api.up();
      await reaches("client", "tcp", "198.19.0.30", 80, ["a", "b"], 45_000);
      await fails("198.19.0.20", 80);
      assert.ok(listRequests(api) > lists0, "the agent did not re-list after the outage");
      await eventually("/healthz 200 after the outage", async () => {
        return (await httpGet(`${healthz}/healthz`)).status === 200 ? true : undefined;
      }, 30_000);
    },
  );

  await t.step("a watch resumed past compaction gets 410 Gone and re-lists", async () => {
    const lists0 = listRequests(api);
    const n0 = api.requests.length;
    // Synchronously, so the agent's immediate re-watch comes after all three: it resumes
    // from a resourceVersion older than the compaction point.
    api.dropWatches();
    api.apply(slice("during", [B]));
    api.compact();
    await reaches("client", "tcp", "198.19.0.30", 80, ["b"]);
    const later = api.requests.slice(n0);
    assert.ok(
      later.some((p) => p.includes("watch=") && /resourceVersion=[1-9]/.test(p)),
      `no resumed watch: ${JSON.stringify(later)}`,
    );
    assert.ok(listRequests(api) > lists0, "no re-list after 410 Gone");
    // After the re-list the watch resumes (client-node waits ~1 s first); the Services that
    // did not change must survive that, not be dropped as "gone from the list".
    const relist = n0 + api.requests.slice(n0).findIndex(isList);
    await eventually("the watch resuming after the re-list", () => {
      const after = api.requests.slice(relist + 1);
      const resumed = after.some((p) => p.startsWith("/api/v1/services?") && /[?&]watch=/.test(p));
      return resumed ? true : undefined;
    }).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(api.requests.slice(n0))}`);
    });
    await new Promise((r) => setTimeout(r, 500));
    await reaches("client", "udp", "198.19.0.53", 53, ["a", "b"]);
    await reaches("client", "tcp", "2001:db8:ffff::10", 80, ["a", "b"]);
  });
}

/** The later steps against the running agent. */
async function driftSteps(t: Deno.TestContext, c: Ctx): Promise<void> {
  const { api, metricsUrl, agent } = c;
  await t.step({
    name: "API server crash (watches cut mid-stream): a change made meanwhile lands",
    fn: async () => {
      // Let every watch settle (client-node may still be in its reconnect delay).
      await new Promise((r) => setTimeout(r, 2000));
      await api.down(); // cuts every watch stream, no clean end
      api.apply(service("crash", { ip: "198.19.0.40" }));
      api.apply(slice("crash", [A]));
      api.compact();
      await reaches("client", "udp", "198.19.0.53", 53, ["a", "b"]);
      api.up();
      await reaches("client", "tcp", "198.19.0.40", 80, ["a"], 60_000);
    },
  });

  await t.step(
    "another program flushes the ruleset: the kernel's notification brings it back",
    async () => {
      // Before the flush: the repair may be logged before `nft` has even returned.
      const from = agent.lines.length;
      // Inside this test's node namespace only (assertInNetns above).
      await run(["nft", "flush", "ruleset"]);
      // The notification starts the repair at once (--min-sync-period later at most).
      await reaches("client", "tcp", "198.19.0.30", 80, ["b"], 10_000);
      await reaches("client", "udp", "198.19.0.53", 53, ["a", "b"]);
      await agent.waitForLine(/another program changed them\); restored/, 10_000, from);
      const m = (await httpGet(metricsUrl)).body;
      assert.ok(
        (metric(m, "kube_nft_proxy_nftables_repairs_total", 'ip_family="IPv4"') ?? 0) >= 1,
        "repair not counted",
      );
    },
  );

  await t.step(
    "the kubernetes-mixin kube-proxy dashboard's selectors find series",
    async () => {
      // By now the agent has had 200s and unanswered requests (the outage). A busy API
      // server also answers 429 and 500: the probe meets one of each, and both panels get a
      // series.
      api.failNext(1, 429, (p) => p.startsWith("/version"));
      api.failNext(1, 500, (p) => p.startsWith("/version"));
      await eventually(
        "a 4xx and a 5xx counted",
        async () => {
          const s = parseExposition((await httpGet(metricsUrl)).body);
          const n4 = select(s, 'rest_client_requests_total{code=~"4.."}').length;
          const n5 = select(s, 'rest_client_requests_total{code=~"5.."}').length;
          return n4 && n5 ? true : undefined;
        },
        30_000,
        500,
      );
      const series = parseExposition((await httpGet(metricsUrl)).body);
      const missing: string[] = [], unexpected: string[] = [];
      for (const m of MIXIN_SELECTORS) {
        const found = select(series, m.selector).length > 0;
        if (!found && !m.absentBecause) missing.push(`${m.panel}: ${m.selector}`);
        if (found && m.absentBecause) unexpected.push(`${m.panel}: ${m.selector}`);
      }
      const rest = series.filter((x) => x.name === "rest_client_requests_total");
      assert.deepEqual(missing, [], `dashboard panels with no series; ${JSON.stringify(rest)}`);
      assert.deepEqual(unexpected, [], "series docs/monitoring.md says are absent");
      const rss = select(series, "process_resident_memory_bytes")[0].value;
      assert.ok(rss > 20e6 && rss < 4e9, `implausible RSS ${rss}`);
    },
  );
}

/** SIGTERM, a restart that adopts the tables, and --cleanup. */
async function lifecycleSteps(t: Deno.TestContext, c: Ctx): Promise<void> {
  const { aut } = c;
  await t.step("SIGTERM: exit 0, rules stay, traffic keeps flowing", async () => {
    const st = await c.agent.stop("SIGTERM");
    assert.equal(st.code, 0, c.agent.tail());
    assert.ok((await nftTable("ip"))?.includes("198.19.0.30"), "rules gone after SIGTERM");
    assert.ok(await nftTable("ip6"), "ip6 table gone after SIGTERM");
    await reaches("client", "tcp", "198.19.0.30", 80, ["b"]);
  });

  await t.step("a restarted agent adopts the tables and keeps serving", async () => {
    const agent = c.agent = aut.start();
    await agent.waitForLine(/Adopting the existing kube-proxy tables/, 30_000);
    await aut.healthy("/healthz 200 after restart");
    await reaches("client", "tcp", "198.19.0.30", 80, ["b"]);
    const st = await agent.stop("SIGTERM");
    assert.equal(st.code, 0, agent.tail());
  });

  await t.step("--cleanup removes both tables; a second --cleanup also exits 0", async () => {
    const first = await AgentProcess.run(["--cleanup"]);
    assert.equal(first.code, 0, first.output);
    assert.equal(await nftTable("ip"), undefined, "ip kube-proxy still there");
    assert.equal(await nftTable("ip6"), undefined, "ip6 kube-proxy still there");
    const second = await AgentProcess.run(["--cleanup"]);
    assert.equal(second.code, 0, second.output);
    await fails("198.19.0.30", 80);
  });
}

Deno.test({
  name: "agent: whole agent against the fake API server, real traffic",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const log = Deno.env.get("KNP_AGENT_LOG");
    const logFile = log ? await Deno.open(log, { create: true, append: true }) : undefined;
    const enc = new TextEncoder();
    const aut = startAgent({
      objects: [
        node(),
        serviceCIDR(),
        service("web", { ip: "198.19.0.10", nodePort: 30080 }),
        slice("web", [A, B]),
        service("dns", { ip: "198.19.0.53", port: 53, protocol: "UDP" }),
        slice("dns", [A, B], "UDP"),
        service("web6", { ip: "2001:db8:ffff::10" }),
        slice("web6", [topo.podIPv6(0), topo.podIPv6(1)]),
        // Malformed on purpose: an impossible ClusterIP, a port out of range.
        service("bad-ip", { ip: "198.19.0.300" }),
        service("bad-port", { ip: "198.19.0.99", port: 70000 }),
      ],
      minSyncPeriod: "200ms",
      args: ["--sync-period=2s", "--v=2"],
      echo: (l) => logFile?.writeSync(enc.encode(`[${l.stream}] ${l.text}\n`)),
    });
    const { api, healthz } = aut;
    const metricsUrl = `${aut.metrics}/metrics`;
    const c: Ctx = { aut, api, healthz, metricsUrl, agent: aut.agent };
    try {
      await startupSteps(t, c);
      await serverSteps(t, c);
      await apiSteps(t, c);
      await driftSteps(t, c);
      await lifecycleSteps(t, c);
    } catch (err) {
      console.error(`--- agent output (last lines) ---\n${c.agent.tail(80)}`);
      throw err;
    } finally {
      await aut.close();
      logFile?.close();
    }
  },
});
