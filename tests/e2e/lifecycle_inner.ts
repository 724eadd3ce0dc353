/**
 * Node lifecycle, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/lifecycle_test.ts (env KNP_TOPO; pods 0 and 1 run echo servers "a" and "b").
 *
 * As upstream's NodeManager (pkg/proxy/node.go): when the Node's IPs change, or the Node is
 * deleted, the agent logs why, posts a Warning Event and exits 1 leaving its rules in place;
 * traffic keeps flowing through the exit, and the restarted agent adopts the rules and serves.
 * Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import type { KObject } from "../fakeapi/server.ts";
import { AgentProcess } from "./fixtures/agent_process.ts";
import { type AgentUnderTest, startAgent } from "./fixtures/agent_under_test.ts";
import { NODE4, NODE6 } from "../topology.ts";
import {
  attachTopology,
  node,
  NODE_NAME,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/lifecycle_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.10";
/** The Node's new InternalIP (the Node object only: the kernel's addresses stay). */
const MOVED4 = "198.18.250.1";

/** The Node with its IPv4 InternalIP replaced. */
function movedNode(): KObject {
  const n = node();
  (n.status as { addresses: { address: string }[] }).addresses[0].address = MOVED4;
  return n;
}

/** Starts `sut`'s agent afresh and waits until it is healthy. */
async function startHealthy(sut: AgentUnderTest): Promise<AgentProcess> {
  sut.start();
  await sut.healthy();
  return sut.agent;
}

/** Waits for the agent to exit by itself; its status. */
async function exited(agent: AgentProcess, timeoutMs = 20_000): Promise<number> {
  let t: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, rej) => {
    t = setTimeout(() => rej(new Error(`agent did not exit\n${agent.tail()}`)), timeoutMs);
  });
  try {
    const st = await Promise.race([agent.status, late]);
    await agent.drained();
    return st.code;
  } finally {
    clearTimeout(t);
  }
}

Deno.test({
  name: "node lifecycle: exit on IP change and deletion, rules stay, the restart adopts",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const sut = startAgent({
      objects: [node(), serviceCIDR(), service("web", { ip: WEB }), slice("web", [A, B])],
      deferStart: true,
    });
    const { api } = sut;
    let agent: AgentProcess | undefined;
    try {
      agent = await startHealthy(sut);
      await reaches(topo, "tcp", WEB, 80, ["a", "b"]);

      await t.step("the Node's IPs change: log, Warning Event, exit 1; traffic flows", async () => {
        const a = agent!;
        // An update that keeps the IPs is applied live (no exit).
        const labelled = node();
        (labelled.metadata as { labels: Record<string, string> }).labels.extra = "1";
        api.apply(labelled);
        await new Promise((r) => setTimeout(r, 1000));
        assert.equal(a.lines.some((l) => /NodeIPs changed/.test(l.text)), false, a.tail());

        api.apply(movedNode());
        assert.equal(await exited(a), 1, a.tail());
        const line = a.lines.find((l) => /NodeIPs changed for the node/.test(l.text));
        assert.ok(line, a.tail());
        assert.ok(line.text.includes(`${NODE4},${NODE6}`), line.text);
        assert.ok(line.text.includes(`${MOVED4},${NODE6}`), line.text);
        assert.match(a.text(), /Shutting down; rules stay in place/);
        const ev = api.events.find((e) => e.reason === "NodeIPsChanged");
        assert.ok(ev, `no NodeIPsChanged Event: ${JSON.stringify(api.events)}`);
        assert.equal(ev.type, "Warning");
        assert.deepEqual(ev.regarding, { kind: "Node", name: NODE_NAME, uid: NODE_NAME });
        assert.match(String(ev.note), new RegExp(`to ${MOVED4.replaceAll(".", "\\.")}`));
        // The rules outlive the agent.
        await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
      });

      await t.step("the restart reads the new IPs, adopts the rules and serves", async () => {
        agent = await startHealthy(sut);
        assert.match(agent.text(), /Adopting the existing kube-proxy tables/);
        assert.match(agent.text(), new RegExp(MOVED4.replaceAll(".", "\\.")));
        // A change made after the restart reaches the kernel.
        api.apply(slice("web", [A]));
        await reaches(topo, "tcp", WEB, 80, ["a"]);
      });

      await t.step("the Node is deleted: log, Warning Event, exit 1; traffic flows", async () => {
        const a = agent!;
        api.remove("Node", undefined, NODE_NAME);
        assert.equal(await exited(a), 1, a.tail());
        assert.match(a.text(), /Node is being deleted/);
        const ev = api.events.find((e) => e.reason === "NodeDeleted");
        assert.ok(ev, `no NodeDeleted Event: ${JSON.stringify(api.events)}`);
        assert.equal(ev.type, "Warning");
        await reaches(topo, "tcp", WEB, 80, ["a"]);
      });

      await t.step(
        "the Node comes back: the restart adopts and serves; SIGTERM exits 0",
        async () => {
          api.apply(node());
          agent = await startHealthy(sut);
          assert.match(agent.text(), /Adopting the existing kube-proxy tables/);
          api.apply(slice("web", [A, B]));
          await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
          const st = await agent.stop();
          assert.equal(st.code, 0, agent.tail());
        },
      );
    } finally {
      await agent?.stop("SIGKILL").catch(() => {});
      await AgentProcess.run(["--cleanup"]).catch(() => {});
      await sut.close();
    }
  },
});
