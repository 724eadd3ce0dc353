import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../model.ts";
import { Proxier } from "./proxier.ts";
import { CFG, ep, state, svc } from "./testing.ts";
import { Draft, WrittenState } from "./written_state.ts";

const NO_STALE = { servicesWithNewEndpoints: [], deletedEndpoints: [] };

class Harness {
  t = 1000;
  readonly fake = new MemoryNftables("ip", "kube-proxy");
  readonly p = new Proxier({
    client: this.fake,
    config: CFG,
    now: () => this.t,
    trimMemory: false,
  });
  constructor(
    readonly st: ProxyState & {
      services: Map<string, ServicePortInfo>;
      endpoints: Map<string, readonly EndpointInfo[]>;
    },
  ) {
  }
  async sync(changed: string[] = [], deleted: string[] = []) {
    const r = await this.p.sync({
      state: this.st,
      changed: new Set(changed),
      deleted: new Set(deleted),
      stale: NO_STALE,
    });
    assert.ok(r !== null);
    return r;
  }
  /** Deletes whatever went stale, then dumps. */
  async settled(): Promise<string> {
    this.t += 5000;
    await this.sync();
    return this.fake.dump();
  }
  set(s: ServicePortInfo, eps: EndpointInfo[]) {
    this.st.services.set(s.id, s);
    this.st.endpoints.set(s.id, eps);
    return s.id;
  }
  remove(id: string) {
    this.st.services.delete(id);
    this.st.endpoints.delete(id);
    return id;
  }
}

async function fresh(st: ProxyState): Promise<string> {
  const h = new Harness({
    ...st,
    services: new Map(st.services),
    endpoints: new Map(st.endpoints),
  });
  await h.sync();
  return h.fake.dump();
}

Deno.test("plan: two ports claiming one frontend: the lowest id writes, the other takes over", async () => {
  const h = new Harness(state() as Harness["st"]);
  await h.sync();
  const ext = { externalIPs: ["198.18.100.1"] };
  const b = h.set(svc("ns/b:http", { clusterIP: "198.19.0.2", ...ext }), [ep("198.18.130.2")]);
  await h.sync([b]);
  const a = h.set(svc("ns/a:http", { clusterIP: "198.19.0.1", ...ext }), [ep("198.18.130.1")]);
  await h.sync([a]);
  const extBuckets = () =>
    h.fake.state()!.maps.get("endpoints-tcp")!.elements.filter((e) => e.key[0] === "198.18.100.1")
      .map((e) => e.value!.join(" . "));
  assert.deepEqual(extBuckets(), ["198.18.130.1 . 8080"], "ns/a sorts first and wins");
  assert.equal(await h.settled(), await fresh(h.st));
  await h.sync([], [h.remove(a)]);
  assert.deepEqual(extBuckets(), ["198.18.130.2 . 8080"], "ns/b takes over when ns/a leaves");
  assert.equal(await h.settled(), await fresh(h.st));
  const rec = h.p.written.frontends.get("198.18.100.1 . tcp . 80")!;
  assert.equal(rec.owner, "ns/b:http");
  assert.equal(rec.others, undefined);
});

Deno.test("plan: a ClusterIP shared by two ports stays until both are gone", async () => {
  const h = new Harness(state() as Harness["st"]);
  const p1 = h.set(svc("ns/a:http"), [ep("198.18.130.1")]);
  const p2 = h.set(svc("ns/a:https", { port: 443 }), [ep("198.18.130.1", { port: 8443 })]);
  await h.sync();
  await h.sync([], [h.remove(p1)]);
  assert.deepEqual(h.fake.state()!.sets.get("cluster-ips")!.elements.map((e) => e.key[0]), [
    "198.19.0.1",
  ]);
  await h.sync([], [h.remove(p2)]);
  assert.deepEqual(h.fake.state()!.sets.get("cluster-ips")!.elements, []);
  assert.equal(await h.settled(), await fresh(h.st));
});

Deno.test("plan: a port moving between own chains and elements is rewired atomically", async () => {
  const h = new Harness(state() as Harness["st"]);
  const eps = [ep("198.18.129.1", { isLocal: true }), ep("198.18.130.1")];
  const id = h.set(svc("ns/a:http", { nodePort: 30001 }), eps);
  await h.sync();
  h.set(svc("ns/a:http", { nodePort: 30001, externalPolicyLocal: true }), eps);
  await h.sync([id]);
  assert.ok((await h.fake.listChains()).some((c) => c.startsWith("external-")));
  assert.equal(await h.settled(), await fresh(h.st));
  h.set(svc("ns/a:http", { nodePort: 30001, stickyMaxAgeSeconds: 60 }), eps);
  await h.sync([id]);
  assert.equal(await h.settled(), await fresh(h.st));
  h.set(svc("ns/a:http", { nodePort: 30001 }), eps);
  await h.sync([id]);
  const dump = await h.settled();
  assert.ok(!/chain (service|external|local)-[A-Z2-7]{8}-/.test(dump), "own chains are gone");
  assert.ok(!/affinity-/.test(dump), "affinity sets are gone");
  assert.equal(dump, await fresh(h.st));
});

Deno.test("written state: a draft reads through, writes aside, and commits as one delta", () => {
  const w = new WrittenState();
  w.clusterIPs.set("198.19.0.1", 2);
  const d = new Draft(w);
  assert.equal(d.bump("clusterIPs", "198.19.0.1", -1), 1);
  assert.equal(d.bump("clusterIPs", "198.19.0.2", 1), 1);
  assert.equal(d.bump("clusterIPs", "198.19.0.1", -1), 0);
  assert.deepEqual([...d.keys("clusterIPs")], ["198.19.0.2"]);
  assert.equal(w.clusterIPs.get("198.19.0.1"), 2, "the base is untouched");
  d.setMeta({ gen: 3 });
  w.commit(d.delta);
  assert.deepEqual([...w.clusterIPs], [["198.19.0.2", 1]]);
  assert.equal(w.gen, 3);
});

Deno.test("written state: a draft differs from its base only by values unlike the base's", () => {
  const w = new WrittenState();
  w.classes.set("dnat-tcp-3", 2);
  const d = new Draft(w);
  assert.equal(d.differs("classes"), false);
  // A frontend leaving a class and one joining it (an endpoint swapped in place): no difference.
  d.bump("classes", "dnat-tcp-3", -1);
  d.bump("classes", "dnat-tcp-3", 1);
  assert.equal(d.differs("classes"), false);
  d.bump("classes", "dnat-tcp-4", 1);
  assert.equal(d.differs("classes"), true);
  d.bump("classes", "dnat-tcp-4", -1); // back to absent
  assert.equal(d.differs("classes"), false);
  d.bump("classes", "dnat-tcp-3", -2); // removed
  assert.equal(d.differs("classes"), true);
});
