/**
 * The netlink port ids of this process's own sockets of one protocol:
 * /proc/self/fd names each socket's inode, /proc/self/net/netlink maps inodes
 * to port ids. Covers sockets we cannot ask directly (libnftables opens its
 * own inside its context).
 *
 * @module
 */

/** One row of /proc/net/netlink. */
export interface NetlinkRow {
  protocol: number;
  portid: number;
  inode: number;
}

/** Parses /proc/net/netlink (`sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode`). */
export function parseProcNetlink(text: string): NetlinkRow[] {
  const out: NetlinkRow[] = [];
  for (const line of text.split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const protocol = Number(f[1]), portid = Number(f[2]), inode = Number(f[9]);
    if (Number.isFinite(protocol) && Number.isFinite(portid) && Number.isFinite(inode)) {
      out.push({ protocol, portid, inode });
    }
  }
  return out;
}

/** Socket inodes among this process's open file descriptors. */
function ownSocketInodes(): Set<number> {
  const out = new Set<number>();
  for (const e of Deno.readDirSync("/proc/self/fd")) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(Deno.readLinkSync(`/proc/self/fd/${e.name}`));
      if (m) out.add(Number(m[1]));
    } catch { /* closed meanwhile */ }
  }
  return out;
}

/** Port ids of this process's netlink sockets of `protocol` (empty when /proc is unreadable). */
export function ownPortids(protocol: number): Set<number> {
  try {
    const inodes = ownSocketInodes();
    const rows = parseProcNetlink(Deno.readTextFileSync("/proc/self/net/netlink"));
    return new Set(
      rows.filter((r) => r.protocol === protocol && inodes.has(r.inode)).map((r) => r.portid),
    );
  } catch {
    return new Set();
  }
}
