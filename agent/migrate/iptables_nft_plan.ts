/**
 * What of kube-proxy's iptables mode to remove from one iptables-nft table, decided from its
 * listing: a pure planner, no kernel. On a node whose iptables is iptables-nft, kube-proxy's
 * iptables-mode rules are ordinary nftables objects in the `ip`/`ip6` tables `nat`, `filter` and
 * `mangle`: its `KUBE-*` chains and the jump rules it put in the base chains.
 *
 * Which chains and jumps are kube-proxy's follows upstream's iptables proxier (pkg/proxy/iptables:
 * `iptablesJumpChains`, `iptablesCleanupOnlyChains`, and `CleanupLeftovers` in cleanup.go, read
 * from the stored copy of 1.33-1.35; 1.37's list of chains is the same as far as the issue says).
 * Kubelet's chains that share the prefix (`KUBE-FIREWALL`, `KUBE-KUBELET-CANARY`,
 * `KUBE-MARK-DROP`) are not kube-proxy's and stay, as upstream's cleanup leaves them.
 *
 * The listing hides iptables' `-m comment` (an xt match nft prints as nothing), so a jump rule is
 * recognised by where it is and where it goes: a rule of an upstream source chain (PREROUTING,
 * OUTPUT, ...) whose verdict jumps to the entry chain upstream links from there. Any other rule
 * outside kube-proxy's chains that reaches one of them (another program's) keeps that chain, and
 * every kube-proxy chain it leads to, in place: nothing but kube-proxy's objects is touched.
 *
 * @module
 */
import { Transaction } from "../../ffi/nftables/types.ts";
import type { Family, TableState } from "../../ffi/nftables/types.ts";

/** The iptables tables kube-proxy's iptables mode writes to. */
export type IptTable = "nat" | "filter" | "mangle";

/** The tables, in the order they are cleaned. */
export const IPT_TABLES: readonly IptTable[] = ["nat", "filter", "mangle"];

/** The families iptables-nft writes (iptables and ip6tables). */
export const IPT_FAMILIES: readonly ("ip" | "ip6")[] = ["ip", "ip6"];

/** The canary chain kube-proxy keeps in every table to notice a flush. */
const CANARY = "KUBE-PROXY-CANARY";

/** kube-proxy's fixed chains per table (upstream's CleanupLeftovers lists). */
const FIXED: Record<IptTable, readonly string[]> = {
  nat: ["KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", CANARY],
  filter: [
    "KUBE-SERVICES",
    "KUBE-EXTERNAL-SERVICES",
    "KUBE-FORWARD",
    "KUBE-NODEPORTS",
    "KUBE-PROXY-FIREWALL",
    CANARY,
  ],
  mangle: [CANARY],
};

/**
 * Per-service chain prefixes (upstream's isServiceChainName): cluster policy, local policy,
 * endpoint, firewall, external, and the deprecated XLB. Only in `nat`, as upstream.
 */
const SERVICE_PREFIXES = [
  "KUBE-SVC-",
  "KUBE-SVL-",
  "KUBE-SEP-",
  "KUBE-FW-",
  "KUBE-EXT-",
  "KUBE-XLB-",
];

/**
 * The jump rules upstream links its chains with: table, source (base) chain, target. Includes
 * the cleanup-only jump (filter INPUT -> KUBE-SERVICES, kube 1.13-1.19).
 */
const JUMPS: readonly (readonly [IptTable, string, string])[] = [
  ["filter", "INPUT", "KUBE-EXTERNAL-SERVICES"],
  ["filter", "FORWARD", "KUBE-EXTERNAL-SERVICES"],
  ["filter", "INPUT", "KUBE-NODEPORTS"],
  ["filter", "FORWARD", "KUBE-SERVICES"],
  ["filter", "OUTPUT", "KUBE-SERVICES"],
  ["filter", "INPUT", "KUBE-SERVICES"],
  ["filter", "FORWARD", "KUBE-FORWARD"],
  ["filter", "INPUT", "KUBE-PROXY-FIREWALL"],
  ["filter", "OUTPUT", "KUBE-PROXY-FIREWALL"],
  ["filter", "FORWARD", "KUBE-PROXY-FIREWALL"],
  ["nat", "OUTPUT", "KUBE-SERVICES"],
  ["nat", "PREROUTING", "KUBE-SERVICES"],
  ["nat", "POSTROUTING", "KUBE-POSTROUTING"],
];

/** Whether `name` is a chain kube-proxy's iptables mode writes in `table`. */
export function isKubeProxyChain(table: IptTable, name: string): boolean {
  if (FIXED[table].includes(name)) return true;
  return table === "nat" && SERVICE_PREFIXES.some((p) => name.startsWith(p));
}

/** Whether a rule of `chain` jumping to `target` is one of upstream's links. */
export function isUpstreamJump(table: IptTable, chain: string, target: string): boolean {
  return JUMPS.some(([t, src, dst]) => t === table && src === chain && dst === target);
}

const VERDICT = /(?:^|\s)(?:jump|goto)\s+("?)([^\s"{}]+)\1(?=\s|$|[,}])/g;

/** Every chain a rule body jumps or goes to (its final verdict, and inside verdict maps). */
export function jumpTargets(body: string): string[] {
  return [...body.matchAll(VERDICT)].map((m) => m[2]);
}

/** The chain a rule ends by jumping to, when its verdict is a jump or goto; else undefined. */
export function finalJump(body: string): string | undefined {
  const m = /(?:^|\s)(?:jump|goto)\s+("?)([^\s"]+)\1\s*$/.exec(body);
  return m?.[2];
}

/** One jump rule to delete. */
export interface JumpRule {
  /** The chain the rule is in. */
  chain: string;
  /** Its handle. */
  handle: number;
  /** The kube-proxy chain it jumps to. */
  target: string;
}

/** A KUBE-* chain left in place, and why. */
export interface KeptChain {
  /** The chain. */
  chain: string;
  /** Why it stays. */
  why: string;
}

/** What to do in one table. */
export interface TablePlan {
  /** The table's family. */
  family: Family;
  /** The iptables-nft table (nat, filter, mangle). */
  table: IptTable;
  /** Upstream's jump rules, deleted by handle. */
  jumps: JumpRule[];
  /** kube-proxy's chains, flushed and deleted (sorted). */
  chains: string[];
  /** kube-proxy chains another program's rules still reach, and KUBE-* chains not kube-proxy's. */
  kept: KeptChain[];
}

/** Whether a plan removes nothing. */
export function emptyPlan(p: TablePlan): boolean {
  return p.jumps.length === 0 && p.chains.length === 0;
}

/** Plans one table from its listing (null: the table does not exist). */
export function planTable(family: Family, table: IptTable, state: TableState | null): TablePlan {
  const plan: TablePlan = { family, table, jumps: [], chains: [], kept: [] };
  if (state === null) return plan;
  const ours = new Set([...state.chains.keys()].filter((c) => isKubeProxyChain(table, c)));
  /** kube-proxy chains reached from outside them, with the first reason seen. */
  const held = new Map<string, string>();
  for (const [name, { rules }] of state.chains) {
    if (ours.has(name)) continue;
    for (const r of rules) {
      const target = finalJump(r.rule);
      if (target !== undefined && ours.has(target) && isUpstreamJump(table, name, target)) {
        if (r.handle !== undefined) plan.jumps.push({ chain: name, handle: r.handle, target });
        continue;
      }
      for (const t of jumpTargets(r.rule)) {
        if (ours.has(t) && !held.has(t)) {
          held.set(t, `reached by chain ${name} (rule handle ${r.handle ?? "?"})`);
        }
      }
    }
  }
  closeOver(held, ours, state);
  for (const name of [...ours].sort()) {
    const why = held.get(name);
    if (why === undefined) plan.chains.push(name);
    else plan.kept.push({ chain: name, why });
  }
  for (const name of [...state.chains.keys()].sort()) {
    if (name.startsWith("KUBE-") && !ours.has(name)) {
      plan.kept.push({
        chain: name,
        why: "not a kube-proxy chain (kubelet's or another program's)",
      });
    }
  }
  return plan;
}

/** Adds to `held` every kube-proxy chain a held chain leads to: their rules stay as they are. */
function closeOver(held: Map<string, string>, ours: Set<string>, state: TableState): void {
  const queue = [...held.keys()];
  while (queue.length > 0) {
    const from = queue.pop()!;
    for (const r of state.chains.get(from)?.rules ?? []) {
      for (const t of jumpTargets(r.rule)) {
        if (ours.has(t) && !held.has(t)) {
          held.set(t, `reached from ${from}, which is kept`);
          queue.push(t);
        }
      }
    }
  }
}

/**
 * The plan as one transaction: the jump rules by handle, then every chain flushed, then every
 * chain deleted (the flushes drop the jumps between them, so the deletes find them unused).
 */
export function planTransaction(p: TablePlan): Transaction {
  const tx = new Transaction();
  for (const j of p.jumps) tx.delete({ kind: "rule", chain: j.chain, rule: "", handle: j.handle });
  for (const c of p.chains) tx.flush({ kind: "chain", name: c });
  for (const c of p.chains) tx.delete({ kind: "chain", name: c });
  return tx;
}
