/**
 * Which way a transaction goes to the kernel. The client asks here and does
 * what it is told; nothing else decides a route.
 *
 * 1. `elements`: every operation adds or deletes an element, raw element
 *    writes are on (`rawElements`, KUBE_NFT_PROXY_RAW_ELEMENTS≠0) and this is
 *    not a dry run: one nf_tables netlink batch (netlink/writer.ts). At 30k
 *    Services a cold start is ~400k elements, which libnftables' parser
 *    spends seconds and hundreds of MB on. If the batch cannot be encoded (a
 *    layout we do not encode) or the kernel refuses it (nothing applied: one
 *    batch), the same operations go the `script` way, which names the
 *    failing element.
 * 2. `script`: anything else, and every dry run: nft script text through
 *    libnftables, one atomic `nft_run_cmd_from_buffer`.
 *
 * The hazard: libnftables 1.0.x loads every set of every table before most
 * commands and crashes this process on userdata it cannot decode (a set
 * another program wrote, see netlink/set_screen.ts). Inside the queue, just
 * before a script runs, {@link scriptRoute} is told whether such a set
 * exists: with one, a lone table delete (`--cleanup`) goes over plain
 * netlink (`netlink-table-delete`), and everything else is refused with the
 * reason.
 *
 * @module
 */
import type { Operation } from "./types.ts";

/** The way a transaction leaves the client, decided before it is queued. */
export type WriteRoute = "elements" | "script";

/** What decides {@link writeRoute}. */
export interface RouteOptions {
  /** Raw element writes are enabled (the client has a RawElementWriter). */
  rawElements: boolean;
  /** A dry run (`check`): only libnftables can validate without committing. */
  dryRun: boolean;
}

/** `elements` for an element-only, committed transaction with raw writes on; else `script`. */
export function writeRoute(ops: readonly Operation[], opts: RouteOptions): WriteRoute {
  if (!opts.rawElements || opts.dryRun) return "script";
  return ops.every((o) => o.obj.kind === "element") ? "elements" : "script";
}

/** How a script runs, decided in the queue, when the namespace's sets are known. */
export type ScriptRoute =
  | { via: "libnftables" }
  | { via: "netlink-table-delete" }
  | { via: "refused"; why: string };

/**
 * `libnftables` without a hazard; with one (`hazard` says why), a committed
 * lone table delete goes over plain netlink and anything else is refused.
 */
export function scriptRoute(
  ops: readonly Operation[],
  dryRun: boolean,
  hazard: string | undefined,
): ScriptRoute {
  if (hazard === undefined) return { via: "libnftables" };
  const tableDelete = ops.length === 1 && ops[0].verb === "delete" && ops[0].obj.kind === "table";
  return !dryRun && tableDelete ? { via: "netlink-table-delete" } : { via: "refused", why: hazard };
}
