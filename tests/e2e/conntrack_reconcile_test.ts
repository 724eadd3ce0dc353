/**
 * Real-kernel tests of the conntrack reconciler and the post-sync cleanup:
 * flows are created in a fresh namespace with `conntrack -I`, the logic runs
 * with the real FFI client in a child Deno inside it (fixtures/ct_reconcile.ts),
 * and the survivors are read back with `conntrack -L`.
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, type Netns, repoRoot, withNetns } from "../netns.ts";
import type { EndpointInfo, ServicePortInfo } from "../../proxier/model.ts";
import type { ReconcileScript } from "./fixtures/ct_reconcile.ts";

const FIXTURE = `${repoRoot}/tests/e2e/fixtures/ct_reconcile.ts`;

/** A flow for `conntrack -I`: client port `sport` to dst:dport, answered by `rsrc`. */
interface Flow {
  proto?: "udp" | "tcp";
  src: string;
  sport: number;
  dst: string;
  dport: number;
  rsrc: string;
}

async function insert(ns: Netns, flows: Flow[]): Promise<void> {
  for (const f of flows) {
    const args = ["-I", "-p", f.proto ?? "udp", "-s", f.src, "-d", f.dst];
    args.push("--sport", `${f.sport}`, "--dport", `${f.dport}`, "--reply-src", f.rsrc);
    args.push("--reply-dst", f.src, "--reply-port-src", `${f.dport}`);
    args.push("--reply-port-dst", `${f.sport}`, "-t", "120");
    if (f.proto === "tcp") args.push("--state", "ESTABLISHED");
    await ns.exec(["conntrack", ...args]);
  }
}

/** Client source ports of the flows left, per family. */
async function survivors(ns: Netns, family: 4 | 6): Promise<number[]> {
  const r = await ns.exec(["conntrack", "-L", "-f", family === 4 ? "ipv4" : "ipv6"], {
    check: false,
  });
  return r.stdout.split("\n").filter((l) => l.includes("sport=")).map((l) =>
    Number(/sport=(\d+)/.exec(l)![1])
  ).sort((a, b) => a - b);
}

function svc(id: string, clusterIP: string, port: number, nodePort = 0): ServicePortInfo {
  return {
    id,
    namespace: "e2e",
    name: id,
    portName: "",
    protocol: "UDP",
    family: clusterIP.includes(":") ? 6 : 4,
    clusterIP,
    port,
    nodePort,
    externalIPs: [],
    loadBalancerIPs: [],
    loadBalancerSourceRanges: [],
    stickyMaxAgeSeconds: 0,
    externalPolicyLocal: false,
    internalPolicyLocal: false,
    healthCheckNodePort: 0,
  };
}

function ep(ip: string): EndpointInfo {
  return { ip, port: 53, ready: true, serving: true, terminating: false, isLocal: true };
}

async function runFixture(ns: Netns, script: ReconcileScript): Promise<Record<string, unknown>> {
  const r = await ns.exec([denoBin, "run", "-A", FIXTURE], { stdin: JSON.stringify(script) });
  return JSON.parse(r.stdout);
}

const C4 = "198.18.200.1";
const V4_FLOWS: Flow[] = [
  { src: C4, sport: 1001, dst: "198.19.0.10", dport: 53, rsrc: "198.18.1.1" }, // good
  { src: C4, sport: 1002, dst: "198.19.0.10", dport: 53, rsrc: "198.18.9.9" }, // gone endpoint
  { src: C4, sport: 1003, dst: "198.19.0.10", dport: 53, rsrc: "198.19.0.10" }, // never DNATed
  { src: C4, sport: 1004, dst: "198.18.100.1", dport: 30053, rsrc: "198.18.9.9" }, // NodePort
  { src: C4, sport: 1005, dst: "198.19.0.20", dport: 514, rsrc: "198.18.3.3" }, // scaled to 0
  { src: C4, sport: 1006, dst: "198.19.0.20", dport: 514, rsrc: "198.19.0.20" }, // no eps, plain
  { src: C4, sport: 1007, dst: "198.19.5.5", dport: 53, rsrc: "198.18.9.9" }, // deleted svc
  { src: C4, sport: 1008, dst: "198.18.7.7", dport: 53, rsrc: "198.18.7.7" }, // not a service
  { proto: "tcp", src: C4, sport: 1009, dst: "198.19.0.10", dport: 53, rsrc: "198.18.9.9" },
];

function v4Script(mode: ReconcileScript["mode"]): ReconcileScript {
  return {
    mode,
    family: 4,
    services: [svc("dns", "198.19.0.10", 53, 30053), svc("empty", "198.19.0.20", 514)],
    endpoints: [["dns", [ep("198.18.1.1")]], ["empty", []]],
    serviceCIDRs: ["198.19.0.0/16"],
  };
}

for (const mode of ["reconcile", "worker"] as const) {
  e2eTest(`conntrack ${mode}: deletes exactly the stale IPv4 UDP flows`, async () => {
    await withNetns(1, async (ns) => {
      await insert(ns, V4_FLOWS);
      assert.equal((await survivors(ns, 4)).length, 9);
      const res = await runFixture(ns, v4Script(mode));
      assert.equal(res.deleted, 5);
      assert.equal(res.scanned, 8, "UDP entries only");
      assert.deepEqual(await survivors(ns, 4), [1001, 1006, 1008, 1009]);
      // Idempotent: a second pass finds nothing.
      assert.equal((await runFixture(ns, v4Script(mode))).deleted, 0);
    });
  });
}

e2eTest("conntrack reconcile: IPv6 flows", async () => {
  await withNetns(1, async (ns) => {
    const c = "2001:db8:9::1";
    await insert(ns, [
      { src: c, sport: 2001, dst: "2001:db8:1::a", dport: 53, rsrc: "2001:db8:2::1" },
      { src: c, sport: 2002, dst: "2001:db8:1::a", dport: 53, rsrc: "2001:db8:2::9" },
      { src: c, sport: 2003, dst: "2001:db8:1::77", dport: 53, rsrc: "2001:db8:2::9" },
      { src: c, sport: 2004, dst: "2001:db8:3::1", dport: 53, rsrc: "2001:db8:2::9" },
    ]);
    const res = await runFixture(ns, {
      mode: "reconcile",
      family: 6,
      services: [svc("dns6", "2001:db8:1::a", 53)],
      endpoints: [["dns6", [ep("2001:db8:2::1")]]],
      serviceCIDRs: ["2001:db8:1::/112"],
    });
    assert.equal(res.deleted, 2);
    assert.deepEqual(await survivors(ns, 6), [2001, 2004]);
  });
});

e2eTest("conntrack cleanupStale: newly active service and removed endpoint", async () => {
  await withNetns(1, async (ns) => {
    await insert(ns, [
      { src: C4, sport: 3001, dst: "198.19.0.20", dport: 514, rsrc: "198.19.0.20" }, // blackhole
      { src: C4, sport: 3002, dst: "198.19.0.20", dport: 515, rsrc: "198.19.0.20" }, // other port
      { src: C4, sport: 3003, dst: "198.19.0.10", dport: 53, rsrc: "198.18.9.9" }, // removed ep
      { src: C4, sport: 3004, dst: "198.18.100.1", dport: 30053, rsrc: "198.18.9.9" }, // via NodePort
      { src: C4, sport: 3005, dst: "198.19.0.10", dport: 53, rsrc: "198.18.1.1" }, // kept ep
    ]);
    const dns = svc("dns", "198.19.0.10", 53, 30053);
    const res = await runFixture(ns, {
      ...v4Script("cleanup"),
      report: {
        servicesWithNewEndpoints: [svc("empty", "198.19.0.20", 514)],
        deletedEndpoints: [{ service: dns, ip: "198.18.9.9", port: 53 }],
      },
    });
    assert.equal(res.deleted, 3);
    assert.deepEqual(await survivors(ns, 4), [3002, 3005]);
  });
});

/** Counts the datagrams a UDP server started with `spawn` reports, one line each. */
function counter(p: Deno.ChildProcess): { count: () => number; done: Promise<void> } {
  let n = 0;
  const done = (async () => {
    const dec = new TextDecoder();
    for await (const chunk of p.stdout) n += dec.decode(chunk).split("\n").length - 1;
  })();
  return { count: () => n, done };
}

async function until(what: string, cond: () => boolean, ms = 3000): Promise<void> {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const SERVER = `const [h, p] = Deno.args;
const s = Deno.listenDatagram({ transport: "udp", hostname: h, port: Number(p) });
console.log("ready");
for await (const _ of s) console.log("got");`;
const CLIENT =
  `const s = Deno.listenDatagram({ transport: "udp", hostname: "198.18.200.1", port: 40000 });
const to = { transport: "udp", hostname: "198.19.0.10", port: 53 } as const;
setInterval(() => s.send(new Uint8Array([1]), to).catch(() => {}), 20);`;

function dnatTo(ip: string): string {
  return `flush ruleset
table ip svc {
  chain out {
    type nat hook output priority -100;
    ip daddr 198.19.0.10 udp dport 53 dnat to ${ip}:5353
  }
}
`;
}

e2eTest("conntrack reconcile ends a real UDP blackhole to a removed endpoint", async () => {
  await withNetns(1, async (ns) => {
    for (const ip of ["198.18.1.1", "198.18.1.2", "198.18.200.1"]) {
      await ns.exec(["ip", "addr", "add", `${ip}/32`, "dev", "lo"]);
    }
    await ns.exec(["ip", "route", "add", "198.19.0.0/16", "dev", "lo"]);
    await ns.exec(["nft", "-f", "-"], { stdin: dnatTo("198.18.1.1") });
    const procs: Deno.ChildProcess[] = [];
    const start = (args: string[]) => {
      const p = ns.spawn([denoBin, "eval", "--unstable-net", ...args], { stderr: "inherit" });
      procs.push(p);
      return p;
    };
    try {
      const a = counter(start([SERVER, "198.18.1.1", "5353"]));
      const b = counter(start([SERVER, "198.18.1.2", "5353"]));
      await until("servers", () => a.count() >= 1 && b.count() >= 1, 15000);
      start([CLIENT]);
      await until("traffic to endpoint A", () => a.count() >= 4, 15000);
      // The endpoint moves to B: new rules, but the client's flow stays pinned to A.
      await ns.exec(["nft", "-f", "-"], { stdin: dnatTo("198.18.1.2") });
      const pinned = a.count();
      await new Promise((r) => setTimeout(r, 300));
      assert.ok(a.count() > pinned + 3, "the existing flow keeps going to the old endpoint");
      assert.equal(b.count(), 1, "nothing reaches the new endpoint yet");
      const res = await runFixture(ns, {
        mode: "reconcile",
        family: 4,
        services: [svc("dns", "198.19.0.10", 53)],
        endpoints: [["dns", [ep("198.18.1.2")]]],
        serviceCIDRs: ["198.19.0.0/16"],
      });
      assert.equal(res.deleted, 1);
      await until("traffic to endpoint B", () => b.count() >= 4);
      const settled = a.count();
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(a.count(), settled, "the old endpoint gets nothing more");
    } finally {
      for (const p of procs) {
        p.kill();
        await p.status;
      }
    }
  });
});
