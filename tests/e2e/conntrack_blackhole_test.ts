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
import { NODE4, type Topology } from "../topology.ts";
import {
  Engine,
  type Flow,
  flows,
  type Json,
  PING_MS,
  Pinger,
  SYNC_MS,
  until,
} from "./fixtures/engine_client.ts";
import {
  CLUSTER_IP4,
  CLUSTER_IP6,
  dnsService,
  dnsSlice,
  engineFor,
  moveEndpoint,
  NODE_PORT,
  nodeObject,
  RECONCILE_MS,
  report,
  withTopology,
} from "./fixtures/blackhole.ts";

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

/** What the restart test's later engines are given, and the flows they find. */
interface Restart {
  svc: Json;
  slice: Json;
  flags: string[];
  sports: number[];
  pingers?: Pinger[];
  before: Map<number, Flow>;
}

/** A fresh engine finds our table, adopts it and resyncs the same cluster: no flow is touched. */
async function adoptionKeepsFlows(topo: Topology, r: Restart): Promise<void> {
  const { svc, slice, flags, sports, before } = r;
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
    for (const p of r.pingers ?? []) {
      const labels = new Set(p.replies().map((r) => r.from));
      assert.equal(labels.size, 1, `each client stayed on one endpoint: ${[...labels]}`);
      // Replies may be late on a loaded machine; a gap means the flow broke.
      const gap = p.maxGap(tRestart, Date.now());
      assert.ok(gap <= 1000, `replies kept flowing across the restart (gap ${gap} ms)`);
    }
  } finally {
    await second.stop();
  }
}

/**
 * Control: without adoption the first sync treats every service as newly active and flushes
 * its flows, which the adoption check would have caught.
 */
async function noAdoptionFlushes(topo: Topology, r: Restart): Promise<void> {
  const { svc, slice, flags, sports, before } = r;
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
}

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

      await adoptionKeepsFlows(topo, { svc, slice, flags, sports, pingers, before });
      await noAdoptionFlushes(topo, { svc, slice, flags, sports, before });
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
