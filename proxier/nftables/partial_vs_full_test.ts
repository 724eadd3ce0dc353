/**
 * Random change sequences (fixed seed): after every partial sync, once stale
 * objects are deleted, the table equals what a fresh full sync of the same
 * state writes.
 */
import assert from "node:assert/strict";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../model.ts";
import { Proxier } from "./proxier.ts";
import { canonicalBuckets, CFG, ep, state, svc } from "./testing.ts";
import { rng } from "../../tests/rng.ts";

type St = ProxyState & {
  services: Map<string, ServicePortInfo>;
  endpoints: Map<string, readonly EndpointInfo[]>;
};

function randomPort(r: () => number, n: number): [ServicePortInfo, EndpointInfo[]] {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const external = r() < 0.4;
  const s = svc(`ns${n % 3}/s${n}:p${Math.floor(r() * 2)}`, {
    clusterIP: `198.19.1.${n % 250}`,
    port: pick([80, 443, 53]),
    protocol: pick(["TCP", "UDP", "SCTP"] as const),
    nodePort: r() < 0.3 ? 30000 + Math.floor(r() * 5) : 0,
    // A few shared addresses make ports compete for frontends.
    externalIPs: external ? [pick(["198.18.100.1", "198.18.100.2"])] : [],
    loadBalancerIPs: r() < 0.2 ? [pick(["198.18.100.2", "198.18.100.3"])] : [],
    loadBalancerSourceRanges: r() < 0.2 ? ["198.18.50.0/24"] : [],
    stickyMaxAgeSeconds: r() < 0.15 ? 60 : 0,
    internalPolicyLocal: r() < 0.15,
  });
  s.externalPolicyLocal = r() < 0.25 &&
    (s.nodePort > 0 || s.externalIPs.length > 0 || s.loadBalancerIPs.length > 0);
  const eps: EndpointInfo[] = [];
  const count = Math.floor(r() * 6);
  for (let i = 0; i < count; i++) {
    const local = r() < 0.4;
    const ready = r() < 0.8;
    eps.push(ep(`198.18.${local ? 129 : 130}.${Math.floor(r() * 8)}`, {
      port: pick([8080, 8443]),
      isLocal: local,
      nodeName: local ? "n1" : "n2",
      ready,
      serving: ready || r() < 0.5,
      terminating: !ready,
    }));
  }
  const seen = new Set<string>();
  return [s, eps.filter((e) => !seen.has(`${e.ip}:${e.port}`) && seen.add(`${e.ip}:${e.port}`))];
}

async function freshDump(st: St): Promise<string> {
  const fake = new MemoryNftables("ip", "kube-proxy");
  const p = new Proxier({ client: fake, config: CFG, trimMemory: false });
  await p.sync({ state: st, changed: new Set(), deleted: new Set(), stale: NO_STALE });
  return fake.dump();
}

const NO_STALE = { servicesWithNewEndpoints: [], deletedEndpoints: [] };

for (const seed of [1, 2, 3, 4]) {
  Deno.test(`partial syncs equal a fresh full sync (seed ${seed})`, async () => {
    const r = rng(seed);
    const st = state() as St;
    let t = 0;
    const fake = new MemoryNftables("ip", "kube-proxy");
    const p = new Proxier({ client: fake, config: CFG, now: () => t, trimMemory: false });
    const sync = (changed: string[], deleted: string[]) =>
      p.sync({ state: st, changed: new Set(changed), deleted: new Set(deleted), stale: NO_STALE });
    await sync([], []);
    for (let step = 0; step < 60; step++) {
      const changed: string[] = [], deleted: string[] = [];
      for (let k = 1 + Math.floor(r() * 3); k > 0; k--) {
        const ids = [...st.services.keys()];
        if (ids.length > 0 && r() < 0.3) {
          const id = ids[Math.floor(r() * ids.length)];
          st.services.delete(id);
          st.endpoints.delete(id);
          deleted.push(id);
        } else {
          const [s, eps] = randomPort(r, Math.floor(r() * 20));
          st.services.set(s.id, s);
          st.endpoints.set(s.id, eps);
          changed.push(s.id);
        }
      }
      const gone = deleted.filter((id) => !st.services.has(id));
      await sync(changed.filter((id) => st.services.has(id)), gone);
      if (step % 20 === 19) p.requestFullSync("test");
      t += 5000;
      await sync([], []);
      assert.equal(
        canonicalBuckets(fake.dump()),
        canonicalBuckets(await freshDump(st)),
        `seed ${seed}, step ${step}`,
      );
    }
  });
}

/** Adoption moves to another generation of bucket maps; compare without the suffix. */
const withoutGen = (dump: string) =>
  dump.replace(/(dnat-(?:tcp|udp|sctp)-\d+|endpoints-(?:large-)?(?:tcp|udp|sctp))-g\d+/g, "$1");

for (const seed of [11, 12]) {
  Deno.test(`restarts and failed transactions converge to a fresh full sync (seed ${seed})`, async () => {
    const r = rng(seed);
    const st = state() as St;
    let t = 0;
    const fake = new MemoryNftables("ip", "kube-proxy");
    const realRun = fake.run.bind(fake);
    let failIn = -1;
    fake.run = (tx) => failIn-- === 0 ? Promise.reject(new Error("injected")) : realRun(tx);
    const start = () => {
      const p = new Proxier({ client: fake, config: CFG, now: () => t, trimMemory: false });
      return p;
    };
    let p = start();
    const sync = (changed: string[], deleted: string[]) =>
      p.sync({ state: st, changed: new Set(changed), deleted: new Set(deleted), stale: NO_STALE });
    for (let step = 0; step < 40; step++) {
      const [s, eps] = randomPort(r, Math.floor(r() * 20));
      st.services.set(s.id, s);
      st.endpoints.set(s.id, eps);
      if (r() < 0.2) p = start();
      if (r() < 0.2) failIn = Math.floor(r() * 2);
      await sync([s.id], []).catch(() => {});
      failIn = -1;
      t += 5000;
      await sync([], []);
      t += 5000;
      await sync([], []);
      assert.equal(
        canonicalBuckets(withoutGen(fake.dump())),
        canonicalBuckets(await freshDump(st)),
        `seed ${seed}, step ${step}`,
      );
    }
  });
}
