/**
 * nodePortAddresses, inner half: runs INSIDE the node namespace of a {@link Topology} built by
 * tests/e2e/nodeport_addresses_test.ts (env KNP_TOPO; pods 0 and 1 run echo servers "a", "b").
 *
 * Real TCP from the client namespace to a NodePort on the node's addresses: the primary IP
 * (NODE4, on lo), the link address (NODE_LINK4, on eth0: an interface address the Node object
 * does not list), and addresses the test adds to and removes from lo while the agent runs.
 * Not a *_test.ts file: it must not run in the host namespace.
 * @module
 */
import assert from "node:assert/strict";
import { AgentProcess } from "./fixtures/agent_process.ts";
import { agentFlags, type AgentUnderTest, startAgent } from "./fixtures/agent_under_test.ts";
import { NODE4, NODE6, NODE_LINK4, NODE_LINK6 } from "../topology.ts";
import { run } from "../netns.ts";
import {
  attachTopology,
  fails,
  node,
  reaches,
  service,
  serviceCIDR,
  slice,
} from "./fixtures/inner_steps.ts";

const topo = attachTopology("tests/e2e/nodeport_addresses_test.ts");
const A = topo.podIPv4(0), B = topo.podIPv4(1);
const NP = 30080, NP6 = 30081;
/** Addresses the test adds on lo: one inside 198.18.6.0/24, one outside every CIDR used. */
const LATER_IN = "198.18.6.1", LATER_OUT = "198.18.7.1";

async function addr(op: "add" | "del", ip: string) {
  await run(["ip", "addr", op, `${ip}/32`, "dev", "lo"], { check: op === "add" });
}

/** Waits until the NodePort on `ip` answers from both endpoints. */
const answers = (ip: string) => reaches(topo, "tcp", ip, NP, ["a", "b"]);
/** Waits until the NodePort on `ip` refuses (nothing listens on the node: RST). */
const refuses = (ip: string) => fails(topo, ip, NP);
/** The same for the IPv6 Service's NodePort. */
const answers6 = (ip: string) => reaches(topo, "tcp", ip, NP6, ["a", "b"]);
const refuses6 = (ip: string) => fails(topo, ip, NP6);

/** --nodeport-addresses=all: every local address, one added later too. */
async function allAddresses(aut: AgentUnderTest): Promise<void> {
  await aut.restart(["--nodeport-addresses=all"]);
  await aut.healthy("restart with all");
  await answers(NODE4);
  await answers(NODE_LINK4);
  await answers(LATER_OUT);
  await addr("add", LATER_IN);
  await answers(LATER_IN);
  await addr("del", LATER_IN);
  assert.match(await nftServices(), /fib daddr type local/);
}

/** primary,CIDR: the Node's IPs and the CIDR's addresses, nothing else. */
async function primaryWithCidr(aut: AgentUnderTest): Promise<void> {
  await aut.restart(["--nodeport-addresses=primary,198.18.3.0/24"]);
  await aut.healthy("restart with primary,198.18.3.0/24");
  await answers(NODE4);
  await answers(NODE_LINK4);
  await refuses(LATER_OUT);
  assert.doesNotMatch(await nftServices(), /fib daddr type local/);
  // IPv6 has an entry now (the Node's primary IPv6): only that address answers.
  await answers6(NODE6);
  await refuses6(NODE_LINK6);
}

/** A bad --nodeport-addresses stops the agent at start with upstream's message. */
async function badMixRefused(aut: AgentUnderTest): Promise<void> {
  const st = await aut.agent.stop();
  assert.equal(st.code, 0, aut.agent.tail());
  const flags = agentFlags(aut.kubeconfig, 1, 1, {
    args: ["--nodeport-addresses=primary,all"],
  });
  const r = await AgentProcess.run(flags);
  assert.notEqual(r.code, 0, r.output);
  assert.match(
    r.output,
    /NodePortAddresses\[1\]: Invalid value: "all": 'all' can't be combined with other values/,
  );
  const bad = await AgentProcess.run(
    agentFlags(aut.kubeconfig, 1, 1, { args: ["--nodeport-addresses=eth0"] }),
  );
  assert.notEqual(bad.code, 0, bad.output);
  assert.match(bad.output, /"eth0": must be a valid CIDR or one of 'primary', 'localhost'/);
}

Deno.test({
  name: "nodePortAddresses on the real kernel, real traffic",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async (t) => {
    const aut = startAgent({
      objects: [
        node(),
        serviceCIDR(),
        service("web", { ip: "198.19.0.10", nodePort: NP }),
        slice("web", [A, B]),
        service("web6", { ip: "2001:db8:ffff::10", nodePort: NP6 }),
        slice("web6", [topo.podIPv6(0), topo.podIPv6(1)]),
      ],
      args: ["--nodeport-addresses=198.18.3.0/24,198.18.6.0/24"],
    });
    try {
      await t.step(
        "a CIDR selects an interface address the Node object does not list",
        async () => {
          await aut.healthy();
          // NODE_LINK4 (198.18.3.1) is on eth0 only; upstream matches CIDRs against interfaces.
          await answers(NODE_LINK4);
          // The primary IP is outside both CIDRs: no NodePort there.
          await refuses(NODE4);
          const rules = (await run(["nft", "list", "set", "ip", "kube-proxy", "nodeport-ips"]))
            .stdout;
          assert.match(rules, /198\.18\.3\.1/);
          assert.doesNotMatch(rules, /198\.18\.0\.1\b/);
        },
      );

      await t.step("a family with no entry matches every address, as upstream", async () => {
        // Only IPv4 CIDRs: upstream gives IPv6 the zero CIDR (nodeport_addresses.go).
        await answers6(NODE6);
        await answers6(NODE_LINK6);
        const chain = (await run(["nft", "list", "chain", "ip6", "kube-proxy", "services"])).stdout;
        assert.match(chain, /fib daddr type local/);
      });

      await t.step(
        "an address added later answers without a restart; removed, it stops",
        async () => {
          await refuses(LATER_IN);
          await addr("add", LATER_IN);
          await addr("add", LATER_OUT);
          await answers(LATER_IN);
          // Added too, but outside the CIDRs.
          await refuses(LATER_OUT);
          await addr("del", LATER_IN);
          await refuses(LATER_IN);
          await answers(NODE_LINK4);
        },
      );

      await t.step(
        "all: every local address answers, one added later too",
        () => allAddresses(aut),
      );

      await t.step(
        "primary mixed with a CIDR: the Node's IP and the CIDR's addresses",
        () => primaryWithCidr(aut),
      );

      await t.step(
        "a bad mix is refused at start with upstream's message",
        () => badMixRefused(aut),
      );
    } finally {
      await addr("del", LATER_IN);
      await addr("del", LATER_OUT);
      await aut.agent.stop("SIGKILL").catch(() => {});
      await AgentProcess.run(["--cleanup"]).catch(() => {});
      await aut.close();
    }
  },
});

/** The `services` chain of the IPv4 table. */
async function nftServices(): Promise<string> {
  return (await run(["nft", "list", "chain", "ip", "kube-proxy", "services"])).stdout;
}
