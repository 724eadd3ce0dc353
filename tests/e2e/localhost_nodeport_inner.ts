/**
 * Localhost NodePorts, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/localhost_nodeport_test.ts (env KNP_TOPO). Every connection is real: from this
 * namespace to 127.0.0.1:<nodePort> and [::1]:<nodePort>, through the agent's userspace proxy,
 * to stream servers in the pods. Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import dgram from "node:dgram";
import { run } from "../netns.ts";
import { AgentProcess, eventually, httpGet } from "./fixtures/agent_process.ts";
import { type AgentUnderTest, startAgent } from "./fixtures/agent_under_test.ts";
import { attachTopology, metric, nft, node, serviceCIDR } from "./fixtures/inner_steps.ts";
import {
  dial,
  labels,
  lhService,
  lhSlice,
  roundTrip,
  startStream,
} from "./fixtures/localhost_steps.ts";

const topo = attachTopology("tests/e2e/localhost_nodeport_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const A6 = topo.podIPv6(0), B6 = topo.podIPv6(1);
/** nodePortAddresses with loopback: the node's primary IPs and both loopback addresses. */
const WITH_LOOPBACK = "--nodeport-addresses=primary,localhost";
/** The same with CIDRs. */
const WITH_LOOPBACK_CIDRS =
  "--nodeport-addresses=198.18.0.1/32,2001:db8::1/128,127.0.0.1/32,::1/128";
const WITHOUT_LOOPBACK = "--nodeport-addresses=198.18.0.1/32,2001:db8::1/128";
const GATE_OFF = "--feature-gates=KubeProxyNFTablesLocalhostNodePorts=false";

/** Waits until `n` connections to host:port reach exactly the labels `want`. */
function reachesOnly(host: string, port: number, want: string[], n = 12) {
  return eventually(
    `${host}:${port} reaching ${want}`,
    async () => {
      const got = await labels(host, port, n);
      if (typeof got === "string") return undefined;
      return JSON.stringify([...new Set(got)].sort()) === JSON.stringify([...want].sort())
        ? got
        : undefined;
    },
    15_000,
    100,
  );
}

/** Waits until a connection to host:port is refused. */
function refused(host: string, port: number) {
  return eventually(
    `${host}:${port} refused`,
    async () => {
      const got = await labels(host, port, 1);
      return typeof got === "string" && got.startsWith("ConnectionRefused") ? got : undefined;
    },
    15_000,
    100,
  );
}

/** The soft and hard "Max open files" of a process. */
function openFileLimits(pid: number): [string, string] {
  const line = Deno.readTextFileSync(`/proc/${pid}/limits`).split("\n")
    .find((l) => l.startsWith("Max open files"))!;
  const [soft, hard] = line.replace("Max open files", "").trim().split(/\s+/);
  return [soft, hard];
}

/** This process's hard open-file limit. */
function hardLimit(): string {
  return openFileLimits(Deno.pid)[1];
}

async function metrics(base: string): Promise<string> {
  return (await httpGet(`${base}/metrics`)).body;
}

/** Restarted with loopback selected and a soft open-file limit of 1024: the agent raises the limit and both families' listeners serve. */
async function loopbackAdded(aut: AgentUnderTest): Promise<void> {
  // A container's soft open-file limit is often 1024: the agent raises it to the hard one.
  await run(["prlimit", `--pid=${Deno.pid}`, "--nofile=1024:"]);
  try {
    await aut.restart([WITH_LOOPBACK]);
  } finally {
    await run(["prlimit", `--pid=${Deno.pid}`, `--nofile=${hardLimit()}:`]);
  }
  await aut.healthy();
  const [soft, hard] = openFileLimits(aut.agent.pid);
  assert.ok(soft === hard && hard !== "1024", `agent's open-file limits ${soft}/${hard}`);
  await reachesOnly("127.0.0.1", 30100, ["a", "b"]);
  await reachesOnly("::1", 30101, ["a", "b"]);
  const m = await metrics(aut.metrics);
  assert.equal(
    metric(m, "kubeproxy_nftables_localhost_nodeport_listeners", 'ip_family="IPv4"'),
    1,
  );
  assert.equal(
    metric(m, "kubeproxy_nftables_localhost_nodeport_listeners", 'ip_family="IPv6"'),
    1,
  );
}

/** An endpoint leaving the Service does not cut a connection already proxied to it. */
async function keepsEstablished(aut: AgentUnderTest): Promise<void> {
  const { api } = aut;
  const held = await dial("127.0.0.1", 30100);
  assert.equal(await roundTrip(held.conn, "before\n"), "before\n");
  const other = held.label === "a" ? B : A;
  api.apply(lhSlice("web", [other]));
  await reachesOnly("127.0.0.1", 30100, [held.label === "a" ? "b" : "a"]);
  // The old connection still talks to the endpoint that was removed from the Service.
  assert.equal(await roundTrip(held.conn, "after\n"), "after\n");
  held.conn.close();
  api.apply(lhSlice("web", [A, B]));
  await reachesOnly("127.0.0.1", 30100, ["a", "b"]);
}

/** UDP to a loopback NodePort: a rule rejects it before a local socket sees it, counted in the counter and the metric. */
async function udpRejected(aut: AgentUnderTest): Promise<void> {
  const { api } = aut;
  api.apply(lhService("dns", { ip: "198.19.0.13", nodePort: 30104, protocol: "UDP" }));
  api.apply(lhSlice("dns", [A], { protocol: "UDP" }));
  // A local socket on the port: without the rule the datagrams would reach it.
  const sink = dgram.createSocket("udp4");
  let received = 0;
  sink.on("message", () => received++);
  await new Promise<void>((r) => sink.bind(30104, "127.0.0.1", r));
  const sender = dgram.createSocket("udp4");
  try {
    const counted = await eventually(
      "UDP rejected and counted",
      async () => {
        await new Promise<void>((r) => sender.send("x", 30104, "127.0.0.1", () => r()));
        await new Promise((r) => setTimeout(r, 200));
        const out = await nft(
          "list",
          "counter",
          "ip",
          "kube-proxy",
          "localhost-nodeport-rejected-udp",
        );
        const n = Number(/packets (\d+)/.exec(out)?.[1] ?? 0);
        return n > 0 ? n : undefined;
      },
      15_000,
      100,
    );
    // Every datagram sent once the rule was in was rejected: the sink saw fewer than sent,
    // and none after the counter moved.
    const before = received;
    for (let i = 0; i < 5; i++) {
      await new Promise<void>((r) => sender.send("y", 30104, "127.0.0.1", () => r()));
    }
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(received, before, "no datagram reaches the local socket");
    const m = await metrics(aut.metrics);
    const v = metric(
      m,
      "kubeproxy_nftables_localhost_nodeport_rejected_packets_total",
      'ip_family="IPv4",protocol="UDP"',
    );
    assert.ok(v !== undefined && v >= counted + 5, `metric ${v}, counter was ${counted}`);
    // The rules went in with every sync succeeding (the listeners follow failed syncs too).
    for (const fam of ["IPv4", "IPv6"]) {
      const failed = metric(
        m,
        "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
        `ip_family="${fam}"`,
      );
      assert.ok(!failed, `${fam} sync failures: ${failed}\n${aut.agent.tail()}`);
    }
    // TCP on the same loopback keeps going through the proxy.
    await reachesOnly("127.0.0.1", 30100, ["a", "b"]);
  } finally {
    sink.close();
    sender.close();
  }
}

/** KubeProxyNFTablesLocalhostNodePorts off: no listener and no reject rules, even with loopback selected. */
async function gateOff(aut: AgentUnderTest): Promise<void> {
  await aut.restart([WITH_LOOPBACK_CIDRS, GATE_OFF]);
  await aut.healthy();
  await reachesOnly("198.18.0.1", 30100, ["a", "b"]);
  await refused("127.0.0.1", 30100);
  await refused("::1", 30101);
  // The reject rules went with the gate (the chain is emptied, then deleted).
  await eventually(
    "the jump to the localhost check gone",
    async () => {
      const table = await nft("list", "table", "ip", "kube-proxy");
      return table.includes("jump localhost-nodeports-check") ? undefined : true;
    },
    15_000,
    100,
  );
  const m = await metrics(aut.metrics);
  assert.equal(
    metric(m, "kubeproxy_nftables_localhost_nodeport_listeners", 'ip_family="IPv4"'),
    undefined,
  );
}

/** ClientIP affinity: every loopback connection lands on one endpoint. */
async function affinityPins(aut: AgentUnderTest): Promise<void> {
  const { api } = aut;
  api.apply(lhService("sticky", { ip: "198.19.0.12", nodePort: 30103, sticky: 60 }));
  api.apply(lhSlice("sticky", [A, B]));
  const got = await eventually(
    "sticky listener",
    async () => {
      const l = await labels("127.0.0.1", 30103, 20);
      return typeof l === "string" ? undefined : l;
    },
    15_000,
    100,
  );
  assert.equal(new Set(got).size, 1, `all 20 connections on one endpoint: ${got}`);
}

Deno.test({
  name: "localhost NodePorts through the userspace proxy, real traffic",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const streams = [
      await startStream(topo.pods[0], "a"),
      await startStream(topo.pods[1], "b"),
    ];
    const aut = startAgent({
      deferStart: true,
      objects: [
        node(),
        serviceCIDR(),
        lhService("web", { ip: "198.19.0.10", nodePort: 30100 }),
        lhSlice("web", [A, B]),
        lhService("web6", { ip: "2001:db8:ffff::10", nodePort: 30101 }),
        lhSlice("web6", [A6, B6]),
      ],
    });
    const { api } = aut;
    try {
      await t.step("without loopback in nodePortAddresses: no listener", async () => {
        aut.start([WITHOUT_LOOPBACK]);
        await aut.healthy();
        // The kernel path answers on the node IP, and nothing answers on loopback.
        await reachesOnly("198.18.0.1", 30100, ["a", "b"]);
        await refused("127.0.0.1", 30100);
        await refused("::1", 30101);
      });

      await t.step(
        "restart with loopback added: listeners appear (kubernetes#142183)",
        () => loopbackAdded(aut),
      );

      await t.step(
        "an endpoint change keeps an established connection",
        () => keepsEstablished(aut),
      );

      await t.step("eTP=Local: local endpoints only, no listener without one", async () => {
        api.apply(lhService("loc", { ip: "198.19.0.11", nodePort: 30102, local: true }));
        api.apply(lhSlice("loc", [A, B], { nodes: ["elsewhere", "elsewhere"] }));
        await reachesOnly("198.18.0.1", 30100, ["a", "b"]); // a sync happened
        await refused("127.0.0.1", 30102);
        api.apply(lhSlice("loc", [A, B], { nodes: ["elsewhere", "knp-e2e-node"] }));
        await reachesOnly("127.0.0.1", 30102, ["b"]);
      });

      await t.step(
        "ClientIP affinity pins loopback clients to one endpoint",
        () => affinityPins(aut),
      );

      await t.step(
        "UDP to a loopback NodePort is rejected by a rule and counted",
        () => udpRejected(aut),
      );

      await t.step("Service deleted: its listener goes, the others stay", async () => {
        api.remove("Service", "default", "sticky");
        await refused("127.0.0.1", 30103);
        await reachesOnly("127.0.0.1", 30100, ["a", "b"]);
      });

      await t.step("gate off: no listener even with loopback selected", () => gateOff(aut));

      await t.step("SIGTERM: exit 0", async () => {
        const st = await aut.agent.stop();
        assert.equal(st.code, 0, aut.agent.tail());
      });
    } finally {
      await aut.agent.stop("SIGKILL").catch(() => {});
      await AgentProcess.run(["--cleanup"]).catch(() => {});
      await aut.close();
      for (const s of streams) await s.stop();
    }
  },
});
