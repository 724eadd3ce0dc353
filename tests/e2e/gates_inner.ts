/**
 * Feature gates and zpages, inner half: runs INSIDE the node namespace of a {@link Topology}
 * built by tests/e2e/gates_test.ts (env KNP_TOPO; pods 0 and 1 run echo servers "a" and "b").
 *
 * The same Service with an externalIP, first under the default gates (the externalIP answers),
 * then after a restart with `--feature-gates=AllowServiceExternalIPs=false`: the ClusterIP still
 * answers and the externalIP no longer does, with real traffic from the client namespace. The
 * metrics port's /statusz, /flagz and /configz are read over real HTTP, and follow their gates.
 * Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { AgentProcess, httpGet } from "./fixtures/agent_process.ts";
import { startAgent } from "./fixtures/agent_under_test.ts";
import {
  attachTopology,
  fails,
  nftTable,
  node,
  NODE_NAME,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/gates_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const WEB = "198.19.0.20";
// Inside the test range (198.18.0.0/15) and outside every topology and Service CIDR.
const EXTERNAL = "198.18.77.7";

Deno.test({
  name: "feature gates: AllowServiceExternalIPs with real traffic, zpages over HTTP",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const web = service("web", { ip: WEB });
    (web.spec as Record<string, unknown>).externalIPs = [EXTERNAL];
    const aut = startAgent({ objects: [node(), serviceCIDR(), web, slice("web", [A, B])] });
    const { api } = aut;
    const page = (path: string) => httpGet(`${aut.metrics}${path}`);
    let agent = aut.agent;
    try {
      await aut.healthy();

      await t.step("default gates: the externalIP and the ClusterIP answer", async () => {
        await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
        await reaches(topo, "tcp", EXTERNAL, 80, ["a", "b"]);
        assert.ok((await nftTable("ip"))?.includes(EXTERNAL), "the externalIP is in the ruleset");
      });

      await t.step("/statusz, /flagz and /configz on the metrics port", async () => {
        const s = await page("/statusz");
        assert.equal(s.status, 200, s.body);
        assert.match(s.body, /^\nkube-proxy statusz\nWarning: /);
        assert.match(s.body, /\nEmulation version[:= ]+ 1\.38\n/);
        const f = await page("/flagz");
        assert.equal(f.status, 200, f.body);
        assert.match(f.body, new RegExp(`\\nhostname-override[:= ]+${NODE_NAME}\\n`));
        const c = JSON.parse((await page("/configz")).body);
        assert.deepEqual(c["kube-nft-proxy"], { version: "v0.1.0", kubeProxyCompatible: "v1.38" });
      });

      await t.step("restart with AllowServiceExternalIPs=false", async () => {
        assert.equal((await agent.stop()).code, 0, agent.tail());
        agent = aut.start(["--feature-gates=AllowServiceExternalIPs=false,ComponentStatusz=false"]);
        await aut.healthy();
        await fails(topo, EXTERNAL, 80);
        await reaches(topo, "tcp", WEB, 80, ["a", "b"]);
        const table = await nftTable("ip");
        assert.ok(
          table?.includes(WEB) && !table.includes(EXTERNAL),
          table ?? "no kube-proxy table",
        );
        // Still refused after more syncs: nothing brings the externalIP back.
        api.apply(slice("web", [A]));
        await reaches(topo, "tcp", WEB, 80, ["a"]);
        await fails(topo, EXTERNAL, 80);
        assert.match(
          agent.text(),
          /Setting deprecated feature gate AllowServiceExternalIPs=false\. It will be removed/,
        );
      });

      await t.step("the gates show on /configz, and /statusz follows its gate", async () => {
        const c = JSON.parse((await page("/configz")).body);
        assert.deepEqual(c["kubeproxy.config.k8s.io"].FeatureGates, {
          AllowServiceExternalIPs: false,
          ComponentStatusz: false,
        });
        assert.equal((await page("/statusz")).status, 404);
        assert.equal((await page("/flagz")).status, 200);
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
