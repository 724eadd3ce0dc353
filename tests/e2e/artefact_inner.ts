/**
 * The code paths that load lazily, inner half: runs INSIDE the node namespace of a
 * {@link Topology} built by tests/e2e/artefact_test.ts (env KNP_TOPO; pods 0 and 1 run echo
 * servers "a" and "b"; KNP_AGENT_ARTEFACT chooses the source tree or the bundle).
 *
 * A bundle can drop what the static import graph does not show: client-node (imported only for
 * credentials Deno's fetch cannot apply), the conntrack Worker (started from a module URL) and
 * the trace/explain commands. So the agent here reaches the API server only through client-node
 * (https with insecure-skip-tls-verify and a bearer token), a UDP client that keeps its source
 * port must be moved off a removed endpoint by the Worker's stale-flow cleanup, and trace and
 * explain must read the live table. Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { FakeApiServer } from "../fakeapi/server.ts";
import { startTlsFront } from "../../agent/testdata/tls_front.ts";
import { CLIENT4 } from "../topology.ts";
import { agentArtefact, AgentProcess, eventually } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import {
  attachTopology,
  node,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";
import { startPinger } from "./fixtures/udp_pinger_client.ts";

const topo = attachTopology("tests/e2e/artefact_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.10", DNS = "198.19.0.53";
const TOKEN = "artefact-e2e-token";

/** A kubeconfig that only client-node can serve: https without verification, and a token. */
function insecureKubeconfig(server: string): string {
  const path = Deno.makeTempFileSync({ prefix: "knp-artefact-", suffix: ".kubeconfig" });
  Deno.writeTextFileSync(
    path,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: c",
      "  cluster:",
      `    server: ${server}`,
      "    insecure-skip-tls-verify: true",
      "users:",
      "- name: u",
      "  user:",
      `    token: ${TOKEN}`,
      "contexts:",
      "- name: x",
      "  context: {cluster: c, user: u}",
      "current-context: x",
      "",
    ].join("\n"),
  );
  return path;
}

Deno.test({
  name: `artefact (${agentArtefact()}): client-node credentials, conntrack Worker, trace/explain`,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const api = FakeApiServer.start({ bookmarkIntervalMs: 500 });
    const front = startTlsFront(api, { token: TOKEN });
    const kubeconfig = insecureKubeconfig(front.url);
    const aut = startAgent({
      api,
      kubeconfig,
      objects: [
        node(),
        serviceCIDR(),
        service("web", { ip: WEB, nodePort: 30080 }),
        slice("web", [A, B]),
        service("dns", { ip: DNS, port: 53, protocol: "UDP" }),
        slice("dns", [A, B], "UDP"),
      ],
      args: ["--v=2"],
    });
    const { agent } = aut;
    try {
      await t.step("client-node carries the API connection (https, token)", async () => {
        await agent.waitForLine(/Loading @kubernetes\/client-node/, 30_000);
        await aut.healthy();
        await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
        assert.ok(front.auth.length > 0, "nothing reached the https front");
        assert.ok(front.auth.every((a) => a === `Bearer ${TOKEN}`), "a request lacked the token");
      });

      await t.step("the conntrack Worker moves a UDP client off a removed endpoint", async () => {
        // Endpoint a only, so the pinger's flow is NATed to a.
        api.apply(slice("dns", [A], "UDP"));
        await reaches(topo, "udp", DNS, 53, ["a"]);
        const pinger = startPinger(topo.client, DNS, 53, 40053);
        try {
          await eventually(
            "pinger replies from a",
            () => pinger.fromSince("a", 0) >= 3 || undefined,
          );
          // a leaves and b arrives. a's echo server still answers, so only deleting the
          // stale flow (the Worker's job) moves this source port to b.
          const t0 = Date.now();
          api.apply(slice("dns", [B], "UDP"));
          await eventually(
            "pinger replies from b",
            () => pinger.fromSince("b", t0) >= 3 || undefined,
            10_000,
          );
          const late = Date.now() + 500;
          await new Promise((r) => setTimeout(r, 1000));
          assert.equal(pinger.fromSince("a", late), 0, "replies still came from a");
        } finally {
          await pinger.stop();
        }
        assert.doesNotMatch(agent.text(), /conntrack reconcile worker (crashed|closed)/);
      });

      await t.step("trace and explain read the live table", async () => {
        const tr = await AgentProcess.run(["trace", "--from", CLIENT4, "--to", `${WEB}:80/tcp`]);
        assert.equal(tr.code, 0, `trace failed:\n${tr.output}`);
        assert.match(tr.output, new RegExp(A.replaceAll(".", "\\.")));
        assert.match(tr.output, new RegExp(B.replaceAll(".", "\\.")));
        const ex = await AgentProcess.run(["explain", "default/web"]);
        assert.equal(ex.code, 0, `explain failed:\n${ex.output}`);
        assert.match(ex.output, /default\/web/);
        assert.match(ex.output, new RegExp(`${WEB.replaceAll(".", "\\.")}`));
      });

      await t.step("SIGTERM: exit 0", async () => {
        const st = await agent.stop();
        assert.equal(st.code, 0, agent.tail());
      });
    } finally {
      await agent.stop("SIGKILL").catch(() => {});
      await AgentProcess.run(["--cleanup"]).catch(() => {});
      await aut.close();
      await api.close();
      await front.close();
      await Deno.remove(kubeconfig).catch(() => {});
    }
  },
});
