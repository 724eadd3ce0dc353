/**
 * Upstream parity, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/parity_test.ts (env KNP_TOPO; pods 0 and 1 run echo servers "a" and "b").
 *
 * Behaviours where upstream's code, not the API's doc comments, decides what users get, each
 * shown with real traffic from the client namespace. Not a *_test.ts file: it must not run in
 * the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import type { KObject } from "../fakeapi/server.ts";
import { AgentProcess, eventually, httpGet } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import { NODE4 } from "../topology.ts";
import {
  attachTopology,
  fails,
  node,
  NODE_NAME,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/parity_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.10";

/** `slice("web", ...)` with each endpoint's conditions replaced. */
function sliceWith(conditions: Record<string, boolean>[]): KObject {
  const s = slice("web", [A, B].slice(0, conditions.length));
  const eps = s.endpoints as { conditions: Record<string, boolean> }[];
  eps.forEach((e, i) => e.conditions = conditions[i]);
  return s;
}

Deno.test({
  name: "parity with upstream kube-proxy, real traffic",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const aut = startAgent({
      objects: [node(), serviceCIDR(), service("web", { ip: WEB }), slice("web", [A, B])],
    });
    const { api, agent } = aut;
    try {
      await aut.healthy();
      await reaches(topo, "tcp", WEB, 80, ["a", "b"]);

      await t.step("an unset serving condition is true (endpointslicecache.go)", async () => {
        // Nothing ready, a terminating with `serving` left out (controllers older than the
        // condition write it so), b terminating and explicitly not serving: upstream's
        // terminating fallback uses a only.
        api.apply(sliceWith([
          { ready: false, terminating: true },
          { ready: false, serving: false, terminating: true },
        ]));
        await reaches(topo, "tcp", WEB, 80, ["a"]);
        // With serving false on a as well, nothing is left: connections are rejected.
        api.apply(sliceWith([
          { ready: false, serving: false, terminating: true },
          { ready: false, serving: false, terminating: true },
        ]));
        await fails(topo, WEB, 80);
      });

      await t.step("a HealthCheckNodePort follows the Service's local endpoints", async () => {
        // eTP=Local LoadBalancer: upstream's health server answers 200 with the count of ready
        // local endpoints, 503 with none (the engine keeps this from changed Services only).
        const lb = service("lb", { ip: "198.19.0.30", nodePort: 30090, type: "LoadBalancer" });
        const spec = lb.spec as Record<string, unknown>;
        spec.externalTrafficPolicy = "Local";
        spec.healthCheckNodePort = 32100;
        api.apply(lb);
        const s = slice("lb", [A, B]);
        const eps = s.endpoints as { nodeName: string }[];
        eps[1].nodeName = "elsewhere";
        api.apply(s);
        const hc = async (want: number, local: number) => {
          await eventually(`health check ${want}, ${local} local`, async () => {
            const r = await httpGet(`http://${NODE4}:32100/`);
            if (r.status !== want) return undefined;
            return JSON.parse(r.body).localEndpoints === local ? true : undefined;
          }, 15_000);
        };
        await hc(200, 1);
        eps[0].nodeName = "elsewhere";
        api.apply(s);
        await hc(503, 0);
        eps[0].nodeName = NODE_NAME;
        eps[1].nodeName = NODE_NAME;
        api.apply(s);
        await hc(200, 2);
      });

      await t.step("SIGTERM: exit 0", async () => {
        const st = await agent.stop();
        assert.equal(st.code, 0, agent.tail());
      });
    } finally {
      await agent.stop("SIGKILL").catch(() => {});
      await AgentProcess.run(["--cleanup"]).catch(() => {});
      await aut.close();
    }
  },
});
