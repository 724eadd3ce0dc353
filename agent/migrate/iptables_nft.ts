/**
 * `--cleanup-iptables-nft` (ours): the one step off kube-proxy's iptables mode. After the
 * agent's first complete sync (its own rules are in place for every family it runs), it removes
 * kube-proxy's iptables-mode objects from the iptables-nft tables through libnftables: the jump
 * rules in the base chains by handle, then the KUBE-* chains (flushed, then deleted), one atomic
 * transaction per table. Which objects are kube-proxy's is decided in ./iptables_nft_plan.ts;
 * everything else in those tables stays, the tables and base chains included. A second run finds
 * nothing. Legacy (x_tables) iptables cannot be reached this way: it is detected and refused
 * with the manual step (./legacy_iptables.ts). The agent never runs an iptables binary.
 *
 * @module
 */
import { Counter, type Registry } from "../../net/prometheus.ts";
import type { Logger } from "../log.ts";
import type { NodeEvent } from "../kube/events.ts";
import type { Family, NftablesClient } from "../../ffi/nftables/types.ts";
import type { IpFamily } from "../../net/family.ts";
import {
  emptyPlan,
  IPT_FAMILIES,
  IPT_TABLES,
  type IptTable,
  planTable,
  planTransaction,
  type TablePlan,
} from "./iptables_nft_plan.ts";
import {
  hasLegacyTables,
  legacyRefusal,
  type LegacyTables,
  readLegacyTables,
} from "./legacy_iptables.ts";

/** Name of the counter of removed objects (ours). */
export const REMOVED_METRIC = "kube_nft_proxy_iptables_nft_removed_total";

/** What {@link removeIptablesNft} works with. */
export interface CleanupDeps {
  /** Opens a client on one iptables-nft table (e.g. `ip nat`). */
  open(family: Family, table: IptTable): NftablesClient;
  /** Logger. */
  log: Logger;
  /** List and log what would go, remove nothing (--dry-run). */
  dryRun?: boolean;
  /** The legacy tables of this namespace (default: read from /proc/net). */
  legacyTables?: () => LegacyTables;
  /** Where {@link REMOVED_METRIC} is registered. */
  registry?: Registry;
  /** Posts an Event about the Node (best effort). */
  event?: (e: NodeEvent) => void;
}

/** What one run did. */
export interface CleanupReport {
  /** The plans applied (or, in a dry run, that would be), non-empty ones only. */
  removed: TablePlan[];
  /** Tables whose removal failed twice, as "ip nat: why". */
  failed: string[];
  /** The legacy tables seen, when any. */
  legacy?: LegacyTables;
}

/** The counter of removed rules and chains, registered once per registry. */
function removedCounter(registry: Registry | undefined): Counter<"ip_family" | "kind"> | undefined {
  if (!registry) return undefined;
  const have = registry.getSingleMetric(REMOVED_METRIC);
  if (have) return have as Counter<"ip_family" | "kind">;
  return new Counter({
    name: REMOVED_METRIC,
    help:
      "Rules and chains of kube-proxy's iptables mode removed by --cleanup-iptables-nft (ours).",
    labelNames: ["ip_family", "kind"],
    registers: [registry],
  });
}

/** Names a table in log lines: "ip nat". */
function where(p: { family: Family; table: IptTable }): string {
  return `${p.family} ${p.table}`;
}

/** Lists, plans and applies one table; retries once on a fresh listing (handles may move). */
async function cleanTable(
  client: NftablesClient,
  family: Family,
  table: IptTable,
  deps: CleanupDeps,
): Promise<{ plan: TablePlan; error?: unknown }> {
  let plan: TablePlan = planTable(family, table, null);
  let error: unknown;
  for (let attempt = 0; attempt < 2; attempt++) {
    plan = planTable(family, table, await client.list());
    if (emptyPlan(plan) || deps.dryRun) return { plan };
    try {
      await client.run(planTransaction(plan));
      return { plan };
    } catch (err) {
      error = err;
      deps.log.v(2)?.info("Removing iptables-nft rules failed; listing again", {
        table: where(plan),
        err: String(err),
      });
    }
  }
  return { plan, error };
}

/** Logs one table's outcome. */
function logTable(deps: CleanupDeps, plan: TablePlan): void {
  const { log } = deps;
  for (const k of plan.kept) {
    if (k.why.startsWith("not a kube-proxy chain")) {
      log.v(2)?.info("Leaving a KUBE-* chain", { table: where(plan), chain: k.chain, why: k.why });
    } else {
      log.warn("Leaving a kube-proxy iptables chain that another rule still uses", {
        table: where(plan),
        chain: k.chain,
        why: k.why,
      });
    }
  }
  if (emptyPlan(plan)) return;
  const chains = plan.chains.length > 12
    ? `${plan.chains.slice(0, 12).join(",")},... (${plan.chains.length})`
    : plan.chains.join(",");
  log.info(
    deps.dryRun
      ? "Would remove kube-proxy's iptables-nft rules (--dry-run)"
      : "Removed kube-proxy's iptables-nft rules",
    {
      table: where(plan),
      jumpRules: plan.jumps.map((j) => `${j.chain}->${j.target}#${j.handle}`).join(","),
      chains,
    },
  );
}

/** Legacy tables: the refusal (logged, and a Warning Event), once per run. */
function checkLegacy(deps: CleanupDeps): LegacyTables | undefined {
  let legacy: LegacyTables;
  try {
    legacy = (deps.legacyTables ?? readLegacyTables)();
  } catch (err) {
    deps.log.warn("Cannot read /proc/net/ip_tables_names; legacy iptables not checked", {
      err: String(err),
    });
    return undefined;
  }
  if (!hasLegacyTables(legacy)) return undefined;
  const why = legacyRefusal(legacy);
  deps.log.error(why);
  deps.event?.({ type: "Warning", reason: "LegacyIptables", action: "CleanupIptables", note: why });
  return legacy;
}

/**
 * Removes kube-proxy's iptables-mode objects from the iptables-nft tables of both families (the
 * IPv6 ones too on a single-stack node: an agent that serves no IPv6 Service leaves no reason to
 * keep kube-proxy's IPv6 DNATs). Never throws: failures are logged and reported.
 */
export async function removeIptablesNft(deps: CleanupDeps): Promise<CleanupReport> {
  const report: CleanupReport = { removed: [], failed: [] };
  report.legacy = checkLegacy(deps);
  const counter = removedCounter(deps.registry);
  for (const family of IPT_FAMILIES) {
    for (const table of IPT_TABLES) {
      let client: NftablesClient | undefined;
      try {
        client = deps.open(family, table);
        const { plan, error } = await cleanTable(client, family, table, deps);
        if (error !== undefined) {
          report.failed.push(`${where(plan)}: ${error}`);
          deps.log.error("Cannot remove kube-proxy's iptables-nft rules", error, {
            table: where(plan),
            manualStep: `nft -a list table ${where(plan)}; delete the jumps to KUBE-* chains ` +
              "from its base chains, then flush and delete the KUBE-* chains kube-proxy wrote",
          });
          continue;
        }
        logTable(deps, plan);
        if (emptyPlan(plan)) continue;
        report.removed.push(plan);
        if (!deps.dryRun) {
          const ip_family = family === "ip" ? "IPv4" : "IPv6";
          counter?.inc({ ip_family, kind: "rule" }, plan.jumps.length);
          counter?.inc({ ip_family, kind: "chain" }, plan.chains.length);
        }
      } catch (err) {
        report.failed.push(`${family} ${table}: ${err}`);
        deps.log.error("Cannot read an iptables-nft table", err, { table: `${family} ${table}` });
      } finally {
        client?.close();
      }
    }
  }
  summarise(deps, report);
  return report;
}

/** The closing line, and the Event when something was removed. */
function summarise(deps: CleanupDeps, report: CleanupReport): void {
  const rules = report.removed.reduce((n, p) => n + p.jumps.length, 0);
  const chains = report.removed.reduce((n, p) => n + p.chains.length, 0);
  if (rules + chains === 0 && report.failed.length === 0) {
    deps.log.info("No kube-proxy iptables-nft rules to remove");
    return;
  }
  if (deps.dryRun) return;
  const tables = report.removed.map(where).join(", ");
  deps.log.info("iptables-nft cleanup done", {
    jumpRules: rules,
    chains,
    tables,
    failed: report.failed.length,
  });
  if (rules + chains > 0) {
    deps.event?.({
      type: "Normal",
      reason: "IptablesNftCleanup",
      action: "CleanupIptables",
      note: `Removed kube-proxy's iptables-mode rules (${rules} jump rules, ${chains} chains ` +
        `in ${tables}) after the first sync`,
    });
  }
}

/**
 * An engine `onSync` callback that runs `fn` once, after the first sync in which every one of
 * `families` has committed at least once (a family may commit a round later than another).
 */
export function afterFirstSync(
  families: readonly IpFamily[],
  fn: () => void,
): (n: number, results: Partial<Record<IpFamily, unknown>>) => void {
  const done = new Set<IpFamily>();
  let fired = false;
  return (_n, results) => {
    if (fired) return;
    for (const f of families) if (results[f] !== undefined) done.add(f);
    if (families.every((f) => done.has(f))) {
      fired = true;
      fn();
    }
  };
}
