/**
 * Real-kernel tests of the stale UDP conntrack problem ("DNS blackhole")
 * through the whole sync engine. UDP has no teardown: a client that keeps
 * sending from one source port keeps its conntrack flow alive, and that flow
 * stays DNATed to the endpoint it first reached even after the endpoint is
 * removed from the Service. The agent deletes such flows right after a sync
 * commits (post-sync cleanup) and in a periodic reconciler; each test shows
 * one path repairing the flow on its own, and a control run shows the flow
 * stays pinned without either.
 *
 * Topology: tests/topology.ts (client 198.18.3.2 -> node router -> pods A =
 * 198.18.1.2, B = 198.18.1.3). The engine runs in a child Deno inside the
 * node namespace (fixtures/engine_driver.ts, fed Kubernetes objects on
 * stdin); the client runs fixtures/udp_pinger.ts from a fixed source port.
 * Each test prints when the flow was deleted and when the client first
 * heard from the new endpoint; KNP_DEBUG=1 also prints the driver's timeline.
 *
 * @module
 */
import assert from "node:assert/strict";
import { e2eTest } from "../netns.ts";
import { NODE4, NODE6, POD_CIDRS, Topology } from "../topology.ts";
import {
  Engine,
  flows,
  type Json,
  PING_MS,
  Pinger,
  startEcho6,
  SYNC_MS,
  until,
} from "./fixtures/engine_client.ts";

const NODE_NAME = "knp-e2e-node";
const RECONCILE_MS = 1000;
const UDP_PORT = 5353;
const TCP_PORT = 8080;
const CLUSTER_IP4 = "198.19.0.53";
const CLUSTER_IP6 = "2001:db8:ffff::53";
const NODE_PORT = 30053;

// ---------------------------------------------------------------------------
// Kubernetes objects, as the API server would send them.
// ---------------------------------------------------------------------------

function nodeObject(): Record<string, unknown> {
  return {
    kind: "Node",
    metadata: { name: NODE_NAME },
    spec: { podCIDRs: POD_CIDRS },
    status: {
      addresses: [{ type: "InternalIP", address: NODE4 }, { type: "InternalIP", address: NODE6 }],
    },
  };
}

function dnsService(family: 4 | 6, nodePort = 0): Record<string, unknown> {
  const clusterIP = family === 4 ? CLUSTER_IP4 : CLUSTER_IP6;
  return {
    kind: "Service",
    metadata: { namespace: "e2e", name: "dns", resourceVersion: "1" },
    spec: {
      type: nodePort ? "NodePort" : "ClusterIP",
      clusterIP,
      clusterIPs: [clusterIP],
      ipFamilies: [family === 4 ? "IPv4" : "IPv6"],
      ports: [{
        name: "dns",
        protocol: "UDP",
        port: 53,
        targetPort: UDP_PORT,
        ...(nodePort ? { nodePort } : {}),
      }],
    },
  };
}

let sliceVersion = 0;

/** The Service's one EndpointSlice, holding exactly `ips`. */
function dnsSlice(family: 4 | 6, ips: string[]): Record<string, unknown> {
  return {
    kind: "EndpointSlice",
    metadata: {
      namespace: "e2e",
      name: `dns-${family}`,
      labels: { "kubernetes.io/service-name": "dns" },
      resourceVersion: String(++sliceVersion),
    },
    addressType: family === 4 ? "IPv4" : "IPv6",
    endpoints: ips.map((ip) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: NODE_NAME,
    })),
    ports: [{ name: "dns", protocol: "UDP", port: UDP_PORT }],
  };
}

// ---------------------------------------------------------------------------
// The scenario: a flow pinned to A, then the Service moves from A to B.
// ---------------------------------------------------------------------------

interface Scenario {
  topo: Topology;
  engine: Engine;
  family: 4 | 6;
  /** Where the client sends: the ClusterIP or the node's NodePort. */
  host: string;
  port: number;
  sport: number;
  /** Pod indexes of the endpoint before and after the change. */
  from: number;
  to: number;
  /** "recover": the flow must move to `to` within `boundMs` of the change. "pinned": control. */
  expect: "recover" | "pinned";
  boundMs: number;
  /** Which conntrack path must do the repair (checked through the driver's events). */
  path?: "post-sync" | "reconcile";
}

const LABELS = ["A", "B"];

function podIP(topo: Topology, family: 4 | 6, i: number): string {
  return family === 4 ? topo.podIPv4(i) : topo.podIPv6(i);
}

/** Programs the Service with endpoint `from`, pins a flow to it, then switches to `to`. */
async function moveEndpoint(
  s: Scenario,
): Promise<{ recoveryMs?: number; syncedMs?: number; repairMs?: number }> {
  const { topo, engine, family } = s;
  const fromIP = podIP(topo, family, s.from), toIP = podIP(topo, family, s.to);
  const fromL = LABELS[s.from], toL = LABELS[s.to];
  await engine.apply(dnsSlice(family, [fromIP]));
  await engine.send({ op: "wait-sync" });
  const pinger = await Pinger.start(topo.client, s.host, s.port, s.sport);
  try {
    await pinger.waitReplies(fromL, 3, 5000);
    const before = await flows(topo, family);
    assert.equal(before.get(s.sport)?.replySrc, fromIP, "the flow is DNATed to the old endpoint");

    const tChange = Date.now();
    await engine.apply(dnsSlice(family, [toIP]));
    const synced = await engine.send({ op: "wait-sync" });
    const tSynced = synced.t as number;

    if (s.expect === "pinned") {
      // Control: nothing deletes the flow, so it keeps reaching the removed endpoint.
      await new Promise((r) => setTimeout(r, s.boundMs + 2 * PING_MS));
      const after = pinger.replies(tSynced);
      assert.ok(after.length >= 5, `replies kept coming: ${JSON.stringify(after)}`);
      assert.ok(
        after.every((r) => r.from === fromL),
        `without cleanup every reply still comes from the removed endpoint ${fromL}: ` +
          JSON.stringify(after),
      );
      assert.equal((await flows(topo, family)).get(s.sport)?.id, before.get(s.sport)?.id);
      assert.equal(engine.since("ct-delete", 0).length, 0);
      assert.equal(engine.since("reconcile", 0).length, 0);
      return {};
    }

    const firstTo = (await pinger.waitReplies(toL, 1, s.boundMs + 2000, tChange))[0];
    const recoveryMs = firstTo.t - tChange;
    // Let the repaired flow run a while to prove it stays on the new endpoint.
    await pinger.waitReplies(toL, 5, 3000, tChange);
    const stray = pinger.replies(firstTo.t).filter((r) => r.from !== toL);
    assert.deepEqual(stray, [], `no reply from ${fromL} once ${toL} answered`);
    assert.ok(
      recoveryMs <= s.boundMs,
      `recovered in ${recoveryMs} ms, more than ${s.boundMs} ms after the change (synced at +${
        tSynced - tChange
      } ms)`,
    );
    const now = (await flows(topo, family)).get(s.sport);
    assert.equal(now?.replySrc, toIP, "the client's flow is now DNATed to the new endpoint");

    // The path under test did the repair, and the disabled path did nothing.
    const deletes = engine.since("ct-delete", tChange);
    const recs = engine.since("reconcile", tChange).filter((r) => (r.deleted as number) > 0);
    // The worker path reports only counts (entries null).
    const hit = (e: Json) =>
      e.entries === null
        ? (e.deleted as number) > 0
        : (e.entries as string[]).some((x) => x.includes(`:${s.sport}->`) && x.endsWith(fromIP));
    if (Deno.env.get("KNP_DEBUG")) {
      // The driver's timeline relative to the change, for tuning the bounds.
      console.log(engine.events.map((e) => `${e.ev} ${(e.t as number) - tChange}`).join("\n"));
    }
    let repairAt: number | undefined;
    if (s.path === "post-sync") {
      assert.ok(
        deletes.some(hit),
        `post-sync cleanup deleted the flow: ${JSON.stringify(deletes)}`,
      );
      assert.equal(engine.since("reconcile", 0).length, 0, "reconciler disabled");
      repairAt = deletes.find(hit)!.t as number;
    } else if (s.path === "reconcile") {
      assert.ok(recs.length > 0, `a reconcile deleted the stale flow: ${JSON.stringify(recs)}`);
      assert.equal(engine.since("ct-delete", 0).length, 0, "post-sync cleanup disabled");
      repairAt = recs[0].t as number;
    }
    if (repairAt !== undefined) {
      assert.ok(repairAt <= firstTo.t, "the client moved only after the flow was deleted");
    }
    // The sync that committed the change reported the removed endpoint, and the
    // post-sync cleanup ran inside that sync, after its transaction.
    const removal = `=${fromIP}:${UDP_PORT}`;
    const staleSync = engine.since("sync", tChange).find((e) => {
      const r = (e.results as Record<string, { stale: { deleted: string[] } }>)[family];
      return r?.stale.deleted.some((d) => d.endsWith(removal));
    });
    assert.ok(staleSync, `a sync reported ${fromIP} as removed: ${JSON.stringify(engine.events)}`);
    if (s.path === "post-sync") assert.ok(repairAt! <= (staleSync.t as number));
    return {
      recoveryMs,
      syncedMs: tSynced - tChange,
      repairMs: repairAt === undefined ? undefined : repairAt - tChange,
    };
  } finally {
    await pinger.stop();
  }
}

/** Builds the topology with UDP echoes "A" and "B" and runs `fn`, cleaning everything up. */
async function withTopology(
  family: 4 | 6,
  fn: (topo: Topology) => Promise<void>,
): Promise<void> {
  const topo = await Topology.create({ pods: 2, tag: "bh" });
  const echo6: Deno.ChildProcess[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      if (family === 4) await topo.startEcho(i, LABELS[i], TCP_PORT, UDP_PORT);
      else echo6.push(await startEcho6(topo, i, LABELS[i], UDP_PORT));
    }
    await fn(topo);
  } finally {
    for (const p of echo6) {
      try {
        p.kill("SIGTERM");
      } catch { /* gone */ }
      await p.status;
    }
    await topo.close();
  }
}

/** Starts an engine and feeds it the Node and the Service (no endpoints yet), all synced. */
async function engineFor(
  topo: Topology,
  flags: string[],
  svc: Json,
  family: 4 | 6,
): Promise<Engine> {
  const engine = await Engine.start(topo, [`--families=${family}`, ...flags]);
  try {
    await engine.apply(nodeObject());
    await engine.apply(svc);
    await engine.send({ op: "synced" });
    await engine.send({ op: "wait-sync" });
    return engine;
  } catch (err) {
    await engine.stop().catch(() => {});
    throw err;
  }
}

function report(what: string, r: { recoveryMs?: number; syncedMs?: number; repairMs?: number }) {
  console.log(
    `    ${what}: after the change: synced +${r.syncedMs} ms, flow deleted +${r.repairMs} ms, ` +
      `first reply from the new endpoint +${r.recoveryMs} ms`,
  );
}

// ---------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------

e2eTest(
  "blackhole control: without cleanup the UDP flow stays on the removed endpoint",
  async () => {
    await withTopology(4, async (topo) => {
      const engine = await engineFor(topo, [], dnsService(4), 4);
      try {
        await moveEndpoint({
          topo,
          engine,
          family: 4,
          host: CLUSTER_IP4,
          port: 53,
          sport: 40001,
          from: 0,
          to: 1,
          expect: "pinned",
          boundMs: 2 * SYNC_MS,
        });
        // With the old pod gone for real, the pinned flow is a blackhole: B is never tried.
        await topo.pods[0].exec(["ip", "link", "set", "eth0", "down"]);
        const pinger = await Pinger.start(topo.client, CLUSTER_IP4, 53, 40001);
        try {
          await new Promise((r) => setTimeout(r, 6 * PING_MS));
          const got = pinger.replies();
          assert.deepEqual(got, [], `no replies while pinned to a dead endpoint: ${got.length}`);
          assert.ok(pinger.timeouts() >= 3, "the client times out");
        } finally {
          await pinger.stop();
        }
      } finally {
        await engine.stop();
      }
    });
  },
);

e2eTest(
  "blackhole: post-sync cleanup moves a ClusterIP UDP flow off a removed endpoint",
  async () => {
    await withTopology(4, async (topo) => {
      const engine = await engineFor(topo, ["--post-sync"], dnsService(4), 4);
      try {
        const r = await moveEndpoint({
          topo,
          engine,
          family: 4,
          host: CLUSTER_IP4,
          port: 53,
          sport: 40002,
          from: 0,
          to: 1,
          expect: "recover",
          boundMs: 2 * SYNC_MS,
          path: "post-sync",
        });
        report("post-sync, ClusterIP", r);
      } finally {
        await engine.stop();
      }
    });
  },
);

e2eTest(
  "blackhole: post-sync cleanup on the worker thread (as the agent runs it)",
  async () => {
    await withTopology(4, async (topo) => {
      const engine = await engineFor(topo, ["--post-sync-worker"], dnsService(4), 4);
      try {
        const r = await moveEndpoint({
          topo,
          engine,
          family: 4,
          host: CLUSTER_IP4,
          port: 53,
          sport: 40012,
          from: 0,
          to: 1,
          expect: "recover",
          boundMs: 2 * SYNC_MS,
          path: "post-sync",
        });
        report("post-sync on the worker, ClusterIP", r);
      } finally {
        await engine.stop();
      }
    });
  },
);

e2eTest(
  "blackhole: the reconciler alone moves a ClusterIP UDP flow off a removed endpoint",
  async () => {
    await withTopology(4, async (topo) => {
      const engine = await engineFor(topo, [`--reconcile=${RECONCILE_MS}`], dnsService(4), 4);
      try {
        const r = await moveEndpoint({
          topo,
          engine,
          family: 4,
          host: CLUSTER_IP4,
          port: 53,
          sport: 40003,
          from: 0,
          to: 1,
          expect: "recover",
          boundMs: 2 * RECONCILE_MS,
          path: "reconcile",
        });
        report("reconciler, ClusterIP", r);
      } finally {
        await engine.stop();
      }
    });
  },
);

/** Runs A -> B with post-sync cleanup, then B -> A with a restarted engine running only the reconciler. */
async function bothPaths(
  t: Deno.TestContext,
  family: 4 | 6,
  svc: Json,
  host: string,
  port: number,
  what: string,
  reconcileMode: "worker" | "inline",
): Promise<void> {
  await withTopology(family, async (topo) => {
    await t.step("post-sync cleanup", async () => {
      const engine = await engineFor(topo, ["--post-sync"], svc, family);
      try {
        const r = await moveEndpoint({
          topo,
          engine,
          family,
          host,
          port,
          sport: 40011,
          from: 0,
          to: 1,
          expect: "recover",
          boundMs: 2 * SYNC_MS,
          path: "post-sync",
        });
        report(`post-sync, ${what}`, r);
      } finally {
        await engine.stop();
      }
    });
    await t.step(`reconciler (${reconcileMode}; engine restarted over the table)`, async () => {
      const flags = [`--reconcile=${RECONCILE_MS}`, `--reconcile-mode=${reconcileMode}`];
      const engine = await engineFor(topo, flags, svc, family);
      try {
        const r = await moveEndpoint({
          topo,
          engine,
          family,
          host,
          port,
          sport: 40012,
          from: 1,
          to: 0,
          expect: "recover",
          boundMs: 2 * RECONCILE_MS,
          path: "reconcile",
        });
        report(`reconciler, ${what}`, r);
      } finally {
        await engine.stop();
      }
    });
  });
}

e2eTest("blackhole: NodePort UDP flows are repaired by both paths", async (t) => {
  await bothPaths(t, 4, dnsService(4, NODE_PORT), NODE4, NODE_PORT, "NodePort", "worker");
});

e2eTest("blackhole: IPv6 ClusterIP UDP flows are repaired by both paths", async (t) => {
  await bothPaths(t, 6, dnsService(6), CLUSTER_IP6, 53, "IPv6 ClusterIP", "inline");
});

e2eTest("blackhole: a restarted engine adopts the table and keeps healthy UDP flows", async () => {
  await withTopology(4, async (topo) => {
    const svc = dnsService(4);
    const slice = dnsSlice(4, [topo.podIPv4(0), topo.podIPv4(1)]);
    const flags = ["--post-sync", `--reconcile=${RECONCILE_MS}`];
    const sports = [40021, 40022, 40023, 40024];
    // Creation times tell a surviving flow from one deleted and re-created (see Flow.id).
    await topo.node.exec(["sysctl", "-q", "-w", "net.netfilter.nf_conntrack_timestamp=1"]);
    const first = await engineFor(topo, flags, svc, 4);
    const pingers: Pinger[] = [];
    try {
      await first.apply(slice);
      await first.send({ op: "wait-sync" });
      for (const sp of sports) pingers.push(await Pinger.start(topo.client, CLUSTER_IP4, 53, sp));
      await until(
        "every pinger answered",
        5000,
        () => pingers.every((p) => p.replies().length >= 2) || undefined,
      );
      // Age the flows past a second, so a re-created flow shows a later creation time.
      await new Promise((r) => setTimeout(r, 1200));
      await first.send({ op: "reconcile" });
      for (const r of first.events.filter((j) => j.ev === "reconcile")) {
        assert.equal(r.deleted, 0, `healthy flows are not stale: ${JSON.stringify(r)}`);
      }
      await first.stop();
      const before = await flows(topo, 4);
      for (const sp of sports) {
        assert.ok(
          before.get(sp)?.start,
          `flow from port ${sp}, with a creation time, before restart`,
        );
      }

      // A fresh engine finds our table, adopts it and resyncs the same cluster.
      const tRestart = Date.now();
      const second = await Engine.start(topo, ["--families=4", ...flags]);
      try {
        assert.equal(second.events[0].adopted, true, "the second engine adopted the table");
        await second.apply(nodeObject());
        await second.apply(svc);
        await second.apply(slice);
        await second.send({ op: "synced" });
        await second.send({ op: "wait-sync" });
        await second.send({ op: "reconcile" });
        await new Promise((r) => setTimeout(r, RECONCILE_MS + 2 * PING_MS));
        const after = await flows(topo, 4);
        for (const sp of sports) {
          assert.deepEqual(after.get(sp), before.get(sp), `flow from port ${sp} survived`);
        }
        assert.equal(second.since("ct-delete", tRestart).length, 0, "post-sync deleted nothing");
        for (const r of second.since("reconcile", tRestart)) {
          assert.equal(r.deleted, 0, `reconcile deleted nothing: ${JSON.stringify(r)}`);
        }
        for (const p of pingers) {
          const labels = new Set(p.replies().map((r) => r.from));
          assert.equal(labels.size, 1, `each client stayed on one endpoint: ${[...labels]}`);
          // Replies may be late on a loaded machine; a gap means the flow broke.
          const gap = p.maxGap(tRestart, Date.now());
          assert.ok(gap <= 1000, `replies kept flowing across the restart (gap ${gap} ms)`);
        }
      } finally {
        await second.stop();
      }

      // Control: without adoption the first sync treats every service as newly
      // active and flushes its flows, which the check above would have caught.
      const third = await Engine.start(topo, ["--families=4", "--adopt=no", ...flags]);
      try {
        await third.apply(nodeObject());
        await third.apply(svc);
        await third.apply(slice);
        await third.send({ op: "synced" });
        await third.send({ op: "wait-sync" });
        await new Promise((r) => setTimeout(r, 2 * PING_MS));
        const flushed = await flows(topo, 4);
        const deleted = third.since("ct-delete", 0).flatMap((e) => e.entries as string[]);
        for (const sp of sports) {
          assert.ok(deleted.some((x) => x.includes(`:${sp}->`)), `flow ${sp} was flushed`);
          assert.notEqual(flushed.get(sp)?.start, before.get(sp)?.start, `flow ${sp} is new`);
        }
      } finally {
        await third.stop();
      }
    } finally {
      for (const p of pingers) await p.stop();
      await first.stop().catch(() => {});
    }
  });
});

e2eTest(
  "blackhole: an endpoint removed while the engine was down is repaired after restart",
  async () => {
    await withTopology(4, async (topo) => {
      const svc = dnsService(4);
      const flags = ["--post-sync", `--reconcile=${RECONCILE_MS}`];
      const sport = 40031;
      const first = await engineFor(topo, flags, svc, 4);
      let pinger: Pinger | undefined;
      try {
        await first.apply(dnsSlice(4, [topo.podIPv4(0)]));
        await first.send({ op: "wait-sync" });
        pinger = await Pinger.start(topo.client, CLUSTER_IP4, 53, sport);
        await pinger.waitReplies("A", 3, 5000);
        await first.stop();

        // A left the Service while no engine ran: the new engine never sees it removed,
        // so only the reconciler, comparing flows with the programmed state, can tell.
        const tRestart = Date.now();
        const second = await Engine.start(topo, ["--families=4", ...flags]);
        try {
          assert.equal(second.events[0].adopted, true);
          await second.apply(nodeObject());
          await second.apply(svc);
          await second.apply(dnsSlice(4, [topo.podIPv4(1)]));
          await second.send({ op: "synced" });
          const tSynced = (await second.send({ op: "wait-sync" })).t as number;
          const firstB = (await pinger.waitReplies("B", 1, 2 * RECONCILE_MS + 2000, tRestart))[0];
          await pinger.waitReplies("B", 4, 3000, tRestart);
          assert.deepEqual(pinger.replies(firstB.t).filter((r) => r.from !== "B"), []);
          assert.ok(
            firstB.t - tSynced <= 2 * RECONCILE_MS,
            `moved ${firstB.t - tSynced} ms after the first sync`,
          );
          const recs = second.since("reconcile", tRestart).filter((r) => (r.deleted as number) > 0);
          assert.ok(recs.length > 0, "the reconciler deleted the stale flow");
          assert.equal(
            second.since("ct-delete", tRestart).length,
            0,
            "post-sync had nothing to go on",
          );
          console.log(
            `    restart: flow moved to B ${firstB.t - tSynced} ms after the adopting sync ` +
              `(reconcile at +${(recs[0].t as number) - tSynced} ms)`,
          );
        } finally {
          await second.stop();
        }
      } finally {
        await pinger?.stop();
        await first.stop().catch(() => {});
      }
    });
  },
);
