/**
 * Runs the nftables contract suite against the real libnftables client and
 * kernel. It changes the ruleset of the network namespace it runs in, so it
 * refuses to run unless KNP_IN_TEST_NETNS=1: tests/e2e/contract_test.ts starts
 * it inside a fresh namespace. Every case gets its own table, deleted after.
 * A differential test at the end applies real builder output to both the
 * kernel and MemoryNftables and compares the resulting tables.
 *
 * @module
 */
import { nftFamily } from "../../net/family.ts";
import assert from "node:assert/strict";
import { cases, summarize } from "./nftables_cases.ts";
import { openNftables } from "../../ffi/nftables/client.ts";
import { MemoryNftables } from "../../ffi/nftables/memory/client.ts";
import type {
  EndpointInfo,
  ProxierConfig,
  ProxyState,
  ServicePortInfo,
} from "../../proxier/model.ts";
import { Proxier } from "../../proxier/nftables/proxier.ts";
import {
  type Chain,
  type Element,
  type Family,
  type Map as NftMap,
  type NftablesClient,
  NftablesError,
  type Rule,
  type Set as NftSet,
  type TableState,
  Transaction,
} from "../../ffi/nftables/types.ts";

const inNetns = Deno.env.get("KNP_IN_TEST_NETNS") === "1";
if (!inNetns) {
  console.error(
    "SKIP real nftables contract: it must run inside a test network namespace; " +
      "use tests/e2e/contract_test.ts (it sets KNP_IN_TEST_NETNS=1 there)",
  );
}

cases.forEach((c, i) => {
  Deno.test({
    name: `contract (kernel): ${c.name}`,
    ignore: !inNetns,
    async fn() {
      const table = `knp-contract-${i}`;
      const clients = new Map<Family, NftablesClient>();
      const factory = (family: Family = "ip") => {
        let client = clients.get(family);
        if (client === undefined) clients.set(family, client = openNftables(family, table));
        return client;
      };
      try {
        // Start from no table, whatever an earlier run left behind.
        for (const f of ["ip", "ip6"] as const) await dropTable(factory(f));
        await c.run(factory);
      } finally {
        for (const client of clients.values()) {
          await dropTable(client);
          client.close();
        }
      }
    },
  });
});

async function dropTable(c: NftablesClient): Promise<void> {
  if (await c.list() !== null) await c.run(new Transaction().delete({ kind: "table" }));
}

// ---------------------------------------------------------------------------
// Differential check on real builder output: the same full transactions
// applied to MemoryNftables and to the kernel must leave equal tables (chains,
// rule handles and comments, sets, maps and elements; rule text is compared
// by the cases above only where the kernel does not normalise it).

/** A small synthetic cluster exercising most rule shapes, for one family. */
function syntheticState(family: 4 | 6, services: number | number[], gen = 0): ProxyState {
  const v4 = family === 4;
  const addr = (net: string, i: number) =>
    v4
      ? `198.${net === "svc" ? 19 : 18}.${(i >> 8) & 255}.${i & 255}`
      : `2001:db8:${net === "svc" ? "ffff" : "129"}::${i.toString(16)}`;
  const svcs = new Map<string, ServicePortInfo>();
  const eps = new Map<string, EndpointInfo[]>();
  const ids = typeof services === "number"
    ? Array.from({ length: services }, (_, k) => k + 1)
    : services;
  for (const i of ids) {
    const id = `ns${i % 3}/svc${i}:p${i % 2 === 0 ? "http" : "dns"}`;
    const [nsName, portName] = id.split(":");
    const [namespace, name] = nsName.split("/");
    svcs.set(id, {
      id,
      namespace,
      name,
      portName,
      protocol: i % 5 === 0 ? "UDP" : i % 7 === 0 ? "SCTP" : "TCP",
      family,
      clusterIP: addr("svc", i),
      port: 80 + (i % 3),
      nodePort: i % 4 === 0 ? 30000 + i : 0,
      externalIPs: i % 6 === 0 ? [addr("ext", 200 + i)] : [],
      loadBalancerIPs: i % 8 === 0 ? [addr("ext", 400 + i)] : [],
      loadBalancerSourceRanges: i % 16 === 0 ? [v4 ? "198.18.50.0/24" : "2001:db8:50::/64"] : [],
      stickyMaxAgeSeconds: i % 9 === 0 ? 10800 : 0,
      externalPolicyLocal: i % 10 === 0,
      internalPolicyLocal: i % 11 === 0,
      healthCheckNodePort: i % 10 === 0 ? 31000 + i : 0,
    });
    // Generation `gen` changes the endpoints of every third service.
    const shift = i % 3 === 0 ? gen : 0;
    const n = (i + shift) % 13 === 0 ? 0 : 1 + ((i + shift) % 4);
    eps.set(
      id,
      Array.from({ length: n }, (_, k) => ({
        ip: addr("ep", 1000 + i * 8 + ((k + shift) % 8)),
        port: 8080,
        ready: k !== 3,
        serving: true,
        terminating: k === 3,
        isLocal: k % 2 === 0,
      })),
    );
  }
  return {
    family,
    services: svcs,
    endpoints: eps,
    node: {
      name: "node1",
      labels: {},
      ips: ["198.18.0.1", "2001:db8::1"],
      podCIDRs: ["198.18.129.0/24", "2001:db8:129::/64"],
    },
    serviceCIDRs: v4 ? ["198.19.0.0/16"] : ["2001:db8:ffff::/112"],
  };
}

const NO_STALE = { servicesWithNewEndpoints: [], deletedEndpoints: [] };

const CONFIGS: ProxierConfig[] = [
  {
    masqueradeAll: false,
    masqueradeBit: 14,
    localDetector: { mode: "ClusterCIDR", cidrs: ["198.18.128.0/17", "2001:db8:128::/47"] },
    nodePortAddresses: [],
  },
  {
    masqueradeAll: true,
    masqueradeBit: 3,
    localDetector: { mode: "NodeCIDR" },
    nodePortAddresses: ["198.18.0.0/24", "2001:db8::/64"],
  },
];

for (const family of [4, 6] as const) {
  CONFIGS.forEach((cfg, ci) => {
    Deno.test({
      name: `differential (fake vs kernel): proxier syncs, IPv${family}, config ${ci}`,
      ignore: !inNetns,
      async fn() {
        const table = `knp-diff-${family}-${ci}`;
        const real = openNftables(nftFamily(family), table);
        try {
          await dropTable(real);
          // A cold start, a full sync of a smaller cluster, partial syncs back to the big one.
          const tee = new TeeClient(real);
          const p = new Proxier({ client: tee, config: cfg, trimMemory: false });
          const big = syntheticState(family, 40), small = syntheticState(family, 15);
          const steps: [ProxyState, boolean][] = [[big, true], [small, true], [big, false]];
          for (const [state, full] of steps) {
            if (full) p.requestFullSync("test");
            const changed = new Set([...big.services.keys()]);
            await p.sync({ state, changed, deleted: new Set(), stale: NO_STALE });
            assert.deepEqual(summarize(await real.list()), summarize(tee.fake.state()));
          }
        } finally {
          await dropTable(real);
          real.close();
        }
      },
    });
  });
}

/**
 * Runs every transaction on the kernel and on a MemoryNftables, asserting both
 * accept or both reject it (at the same op), and that reads agree.
 */
class TeeClient implements NftablesClient {
  readonly fake: MemoryNftables;
  readonly #real: NftablesClient;
  constructor(real: NftablesClient) {
    this.#real = real;
    this.fake = new MemoryNftables(real.family, real.table);
  }
  get family(): Family {
    return this.#real.family;
  }
  get table(): string {
    return this.#real.table;
  }
  async run(tx: Transaction): Promise<void> {
    await this.#both(tx, (c) => c.run(tx));
  }
  async check(tx: Transaction): Promise<void> {
    await this.#both(tx, (c) => c.check(tx));
  }
  async #both(tx: Transaction, f: (c: NftablesClient) => Promise<void>): Promise<void> {
    const outcome = async (c: NftablesClient) => {
      try {
        await f(c);
        return undefined;
      } catch (e) {
        return e;
      }
    };
    const fe = await outcome(this.fake);
    const re = await outcome(this.#real);
    const idx = (e: unknown) => e instanceof NftablesError ? e.failedOperation : undefined;
    assert.equal(
      fe === undefined,
      re === undefined,
      `fake and kernel disagree on a ${tx.size}-op transaction: fake ${String(fe)}; kernel ${
        String(re)
      }`,
    );
    if (re !== undefined) {
      assert.equal(idx(fe), idx(re), `fake: ${String(fe)}\nkernel: ${String(re)}`);
      throw re;
    }
  }
  async list(): Promise<TableState | null> {
    const st = await this.#real.list();
    assert.deepEqual(summarize(st), summarize(await this.fake.list()));
    return st;
  }
  async listChains(): Promise<string[]> {
    const chains = await this.#real.listChains();
    assert.deepEqual([...chains].sort(), await this.fake.listChains());
    return chains;
  }
  async listElements(kind: "set" | "map", name: string): Promise<Element[]> {
    const es = await this.#real.listElements(kind, name);
    const text = (l: Element[]) => l.map((e) => [...e.key, ...(e.value ?? [])].join(" ")).sort();
    assert.deepEqual(text(es), text(await this.fake.listElements(kind, name)));
    return es;
  }
  listChain(name: string): Promise<{ chain: Chain; rules: Rule[] } | null> {
    return this.#real.listChain(name);
  }
  getElement(kind: "set" | "map", name: string, key: string[]): Promise<Element | null> {
    return this.#real.getElement(kind, name, key);
  }
  async listSets(): Promise<(NftSet | NftMap)[]> {
    const ss = await this.#real.listSets();
    const names = (l: (NftSet | NftMap)[]) => l.map((s) => `${s.kind} ${s.name}`).sort();
    assert.deepEqual(names(ss), names(await this.fake.listSets()));
    return ss;
  }
  close(): void {
    this.#real.close();
  }
}

for (const family of [4, 6] as const) {
  Deno.test({
    name:
      `differential (fake vs kernel): Proxier full, partial and stale-chain syncs, IPv${family}`,
    ignore: !inNetns,
    async fn() {
      const fam = nftFamily(family);
      const tee = new TeeClient(openNftables(fam, `knp-diff-sync-${family}`));
      let clock = 0;
      const proxier = new Proxier({
        client: tee,
        config: CONFIGS[0],
        staleChainDelayMs: 1000,
        now: () => clock,
        log: () => {},
      });
      const none = { servicesWithNewEndpoints: [], deletedEndpoints: [] };
      const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, k) => a + k);
      const idsOf = (st: ProxyState) => new Set(st.services.keys());
      try {
        await dropTable(tee);
        const a = syntheticState(family, range(1, 40));
        const r1 = await proxier.sync({
          state: a,
          changed: idsOf(a),
          deleted: new Set(),
          stale: none,
        });
        assert.equal(r1?.full, true);
        await tee.list();
        // Partial: services 36-40 go, 41-45 arrive, every third changes endpoints.
        const b = syntheticState(family, range(1, 35).concat(range(41, 45)), 1);
        const changed = new Set(
          [...b.services.keys()].filter((id) => {
            const i = Number(/svc(\d+)/.exec(id)![1]);
            return i > 40 || i % 3 === 0;
          }),
        );
        const deleted = new Set([...a.services.keys()].filter((id) => !b.services.has(id)));
        clock += 10;
        const r2 = await proxier.sync({ state: b, changed, deleted, stale: none });
        assert.equal(r2?.full, false);
        assert.ok(r2!.ops > 0);
        await tee.list();
        // Later: the stale chains are deleted.
        clock += 5000;
        const r3 = await proxier.sync({
          state: b,
          changed: new Set(),
          deleted: new Set(),
          stale: none,
        });
        assert.ok(r3 !== null);
        assert.equal(proxier.written.staleChains.size, 0, "stale chains are deleted later");
        await tee.list();
        // A forced full sync over what is there.
        proxier.requestFullSync("test");
        clock += 10;
        const c = syntheticState(family, range(5, 50), 2);
        const r4 = await proxier.sync({
          state: c,
          changed: idsOf(c),
          deleted: new Set(),
          stale: none,
        });
        assert.equal(r4?.full, true);
        clock += 5000;
        await proxier.sync({ state: c, changed: new Set(), deleted: new Set(), stale: none });
        const st = await tee.list();
        // Frontends of class chains are elements of the class sets (`frontends-...`).
        const frontends = st === null ? 0 : [...st.sets.entries()]
          .filter(([name]) => name.startsWith("frontends-"))
          .reduce((n, [, set]) => n + set.elements.length, 0);
        assert.ok(frontends > 40, `empty table? ${frontends} class-set elements`);
      } finally {
        await dropTable(tee);
        tee.close();
      }
    },
  });
}
