/**
 * Conntrack sysctls as kube-proxy sets them at start-up: the table size
 * (scaled by CPU count, capped at 1,048,576, only ever raised) with its hash
 * size, TCP/UDP timeouts and TCP liberal mode. Zero (or false) leaves a setting alone. A read-only
 * /proc/sys or /sys (containers) is logged once and is not fatal.
 *
 * @module
 */

/** The conntrack part of the proxy configuration. */
export interface ConntrackSysctlConfig {
  /** Table entries per CPU; 0 leaves nf_conntrack_max alone. */
  maxPerCore: number;
  /** Floor for maxPerCore x CPUs. */
  min: number;
  /** nf_conntrack_tcp_timeout_established in seconds; 0 leaves it alone. */
  tcpEstablishedTimeoutSeconds: number;
  /** nf_conntrack_tcp_timeout_close_wait in seconds; 0 leaves it alone. */
  tcpCloseWaitTimeoutSeconds: number;
  /** Sets nf_conntrack_tcp_be_liberal to 1 when true; false leaves it alone. */
  tcpBeLiberal: boolean;
  /** nf_conntrack_udp_timeout in seconds; 0 leaves it alone. */
  udpTimeoutSeconds: number;
  /** nf_conntrack_udp_timeout_stream in seconds; 0 leaves it alone. */
  udpStreamTimeoutSeconds: number;
}

/** Where and how to apply. */
export interface SysctlOptions {
  /** Root of the sysctl tree. Default /proc/sys. */
  procSys?: string;
  /** Root of the module parameters. Default /sys/module. */
  sysModule?: string;
  /** CPU count. Default navigator.hardwareConcurrency. */
  cpus?: number;
  /** Receives one line per change and the read-only notice. */
  log?: (msg: string) => void;
  /** File access; defaults to Deno's. Tests inject failures (EROFS) through it. */
  io?: SysctlIo;
}

/** The file operations used, so tests can simulate a read-only tree. */
export interface SysctlIo {
  /** Reads a /proc/sys file (throws as Deno.readTextFileSync does). */
  readTextFileSync(path: string): string;
  /** Writes a /proc/sys file (throws on a read-only tree or without permission). */
  writeTextFileSync(path: string, text: string): void;
}

/** One value written. */
export interface SysctlChange {
  /** The /proc/sys path written. */
  path: string;
  /** The value read before the write. */
  from: number;
  /** The value written. */
  to: number;
}

/** What {@link applyConntrackSysctls} did. */
export interface SysctlResult {
  /** The values written, in the order they were written. */
  changed: SysctlChange[];
  /** Paths left unchanged because their tree is read-only or not writable by us. */
  notWritable: string[];
}

/**
 * The largest table size kube-proxy computes (kube-proxy 1.36): on a many-core node
 * maxPerCore x CPUs would otherwise ask for millions of entries (and a hash table to match).
 */
export const CONNTRACK_MAX_CAP = 1_048_576;

/**
 * The table size kube-proxy wants: max(maxPerCore x cpus, min), capped at
 * {@link CONNTRACK_MAX_CAP} (1.36), or 0 to leave it alone. The stored copy of upstream's
 * getConntrackMax predates the cap; this follows the release note (issue 20): the floored
 * value is what is capped, so a `min` above the cap is capped too.
 */
export function conntrackMax(
  cfg: Pick<ConntrackSysctlConfig, "maxPerCore" | "min">,
  cpus: number,
): number {
  if (cfg.maxPerCore <= 0) return 0;
  return Math.min(Math.max(cfg.maxPerCore * cpus, cfg.min), CONNTRACK_MAX_CAP);
}

function validate(cfg: ConntrackSysctlConfig, cpus: number): void {
  const ints: [string, number][] = [
    ["conntrack.maxPerCore", cfg.maxPerCore],
    ["conntrack.min", cfg.min],
    ["conntrack.tcpEstablishedTimeout", cfg.tcpEstablishedTimeoutSeconds],
    ["conntrack.tcpCloseWaitTimeout", cfg.tcpCloseWaitTimeoutSeconds],
    ["conntrack.udpTimeout", cfg.udpTimeoutSeconds],
    ["conntrack.udpStreamTimeout", cfg.udpStreamTimeoutSeconds],
  ];
  for (const [name, v] of ints) {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw new Error(`${name} must be a non-negative whole number, got ${v}`);
    }
  }
  if (!Number.isSafeInteger(cpus) || cpus < 1) {
    throw new Error(`CPU count must be >= 1, got ${cpus}`);
  }
}

/** Errors meaning "this tree cannot be written here", as opposed to a real fault. */
function isNotWritable(err: unknown): boolean {
  if (err instanceof Deno.errors.PermissionDenied || err instanceof Deno.errors.NotCapable) {
    return true;
  }
  const code = (err as { code?: string }).code;
  return code === "EROFS" || code === "EACCES" || code === "EPERM";
}

function readInt(io: SysctlIo, path: string): number {
  let text: string;
  try {
    text = io.readTextFileSync(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new Error(`cannot read ${path}: not found (is the nf_conntrack module loaded?)`);
    }
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
  const n = Number(text.trim());
  if (!Number.isSafeInteger(n)) {
    throw new Error(`${path} holds ${JSON.stringify(text)}, not a number`);
  }
  return n;
}

/**
 * Applies the conntrack sysctls. Values already equal are not rewritten;
 * nf_conntrack_max is only ever raised, and the hash size only raised (to
 * nf_conntrack_max / 4) when nf_conntrack_max was, as upstream.
 * Throws on a missing file or malformed config; a read-only tree is logged
 * once and the remaining writes under it are skipped.
 */
export function applyConntrackSysctls(
  cfg: ConntrackSysctlConfig,
  opts: SysctlOptions = {},
): SysctlResult {
  const procSys = opts.procSys ?? "/proc/sys";
  const sysModule = opts.sysModule ?? "/sys/module";
  const cpus = opts.cpus ?? navigator.hardwareConcurrency;
  const io: SysctlIo = opts.io ?? Deno;
  validate(cfg, cpus);
  const result: SysctlResult = { changed: [], notWritable: [] };
  const readOnlyRoots = new Set<string>();

  // Writes `value` unless it is already there (or, with onlyRaise, already larger); says
  // whether the file now holds it.
  const set = (root: string, rel: string, value: number, onlyRaise = false): boolean => {
    const path = `${root}/${rel}`;
    const from = readInt(io, path);
    if (onlyRaise ? from >= value : from === value) return true;
    if (readOnlyRoots.has(root)) {
      result.notWritable.push(path);
      return false;
    }
    try {
      io.writeTextFileSync(path, `${value}\n`);
    } catch (err) {
      if (!isNotWritable(err)) {
        throw new Error(`cannot write ${value} to ${path}: ${(err as Error).message}`);
      }
      result.notWritable.push(path);
      if ((err as { code?: string }).code === "EROFS") {
        // A read-only mount: nothing under it can be written, say so once.
        readOnlyRoots.add(root);
        opts.log?.(
          `conntrack: ${root} is read-only here (${(err as Error).message}); ` +
            `leaving conntrack settings as they are, problems may arise later`,
        );
      } else {
        // Some files only the initial network namespace may write (nf_conntrack_max).
        opts.log?.(
          `conntrack: cannot set ${path} to ${value} (${(err as Error).message}); leaving it`,
        );
      }
      return false;
    }
    result.changed.push({ path, from, to: value });
    opts.log?.(`conntrack: set ${path} ${from} -> ${value}`);
    return true;
  };

  const max = conntrackMax(cfg, cpus);
  if (max > 0) {
    const rel = "net/netfilter/nf_conntrack_max";
    const now = readInt(io, `${procSys}/${rel}`);
    if (now >= max) {
      // Already as large or larger (kube-proxy 1.38): never lowered, and no write is tried, so
      // a node whose operator raised it, or where it cannot be written, is left as it is.
      opts.log?.(`conntrack: ${procSys}/${rel} is already ${now} (>= ${max}); leaving it`);
    } else if (set(procSys, rel, max)) {
      // Only after the table grew (as upstream's SetMax): the kernel takes hashsize from the
      // initial netns only, where nf_conntrack_max is writable too; and only when too small.
      set(sysModule, "nf_conntrack/parameters/hashsize", Math.floor(max / 4), true);
    }
  }
  const nf = "net/netfilter/nf_conntrack_";
  if (cfg.tcpEstablishedTimeoutSeconds > 0) {
    set(procSys, `${nf}tcp_timeout_established`, cfg.tcpEstablishedTimeoutSeconds);
  }
  if (cfg.tcpCloseWaitTimeoutSeconds > 0) {
    set(procSys, `${nf}tcp_timeout_close_wait`, cfg.tcpCloseWaitTimeoutSeconds);
  }
  if (cfg.tcpBeLiberal) set(procSys, `${nf}tcp_be_liberal`, 1);
  if (cfg.udpTimeoutSeconds > 0) set(procSys, `${nf}udp_timeout`, cfg.udpTimeoutSeconds);
  if (cfg.udpStreamTimeoutSeconds > 0) {
    set(procSys, `${nf}udp_timeout_stream`, cfg.udpStreamTimeoutSeconds);
  }
  return result;
}
