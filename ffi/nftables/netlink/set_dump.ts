/**
 * Reads every set of the network namespace (all tables, all families) over
 * a plain NETLINK_NETFILTER dump, without libnftables, and finds those whose
 * userdata would crash libnftables 1.0.x (see set_screen.ts). Also sends a
 * table delete the same way, for `--cleanup` when libnftables cannot be used.
 *
 * @module
 */
import {
  type DumpedSet,
  encodeDeleteTable,
  encodeSetDumpRequest,
  parseSetDump,
  udataHazard,
} from "./set_screen.ts";
import { netfilterDump, NetfilterSocket } from "../../netlink/socket.ts";

/** Every set of the namespace (synchronous: a few ms, even with thousands of sets). */
export function dumpSets(): DumpedSet[] {
  const out: DumpedSet[] = [];
  netfilterDump(
    "set",
    encodeSetDumpRequest(1),
    (rx, got) => parseSetDump(rx, got, (s) => out.push(s)),
  );
  return out;
}

/** A set libnftables 1.0.x would crash on, and why. */
export interface HazardousSet {
  /** nft family name ("ip", "inet", ...). */
  family: string;
  /** The table the set is in. */
  table: string;
  /** The set's name. */
  name: string;
  /** What in its userdata would crash libnftables, for the log line. */
  why: string;
}

/**
 * Verdicts by userdata bytes (as a latin1 string): the screen runs before every libnftables
 * call, over the same few hundred sets, so each distinct blob is parsed once.
 */
const verdicts = new Map<string, string | undefined>();
const VERDICTS_MAX = 4096;

/** Why libnftables would crash on this userdata, or undefined; remembered per distinct blob. */
function cachedHazard(udata: Uint8Array): string | undefined {
  let key = "";
  for (let i = 0; i < udata.length; i++) key += String.fromCharCode(udata[i]);
  if (verdicts.has(key)) return verdicts.get(key);
  const why = udataHazard(udata);
  if (verdicts.size >= VERDICTS_MAX) verdicts.clear();
  verdicts.set(key, why);
  return why;
}

/** The sets of the namespace whose userdata would crash libnftables 1.0.x. */
export function hazardousSets(sets: readonly DumpedSet[] = dumpSets()): HazardousSet[] {
  const out: HazardousSet[] = [];
  for (const s of sets) {
    if (s.userdata === undefined) continue;
    const why = cachedHazard(s.userdata);
    if (why !== undefined) out.push({ family: s.family, table: s.table, name: s.name, why });
  }
  return out;
}

/**
 * Why libnftables must not run now, in words for the log, or undefined: a
 * set whose userdata it would crash on. Undefined too when the dump itself
 * fails (no libmnl): libnftables decides then.
 */
export function libnftablesHazard(): string | undefined {
  let found;
  try {
    found = hazardousSets();
  } catch {
    return undefined;
  }
  if (found.length === 0) return undefined;
  const s = found[0];
  const more = found.length > 1 ? ` (and ${found.length - 1} more sets)` : "";
  return `not calling libnftables: it would crash reading set ${s.family} ${s.table} ` +
    `${s.name}${more}, which another program wrote (probably a newer nft): ${s.why}. ` +
    `Remove that set or upgrade libnftables; rules already in place keep working`;
}

/** Deletes a table over plain netlink; resolves with the kernel's errno (0: deleted). */
export async function deleteTableOverNetlink(family: string, table: string): Promise<number> {
  const sock = new NetfilterSocket();
  try {
    const { acks } = await sock.send(encodeDeleteTable(family, table, 1));
    return [...acks.values()].find((e) => e !== 0) ?? 0;
  } finally {
    sock.close();
  }
}
