/**
 * The process collector every Go Kubernetes component exports (client_golang's
 * ProcessCollector), read from /proc/self on each scrape:
 * `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
 * `process_start_time_seconds`, `process_open_fds` and `process_max_fds`. Plus the JavaScript
 * heap, under the names prom-client's Node.js collector uses, so memory can be split into the
 * heap and native shares.
 *
 * @module
 */
import { Counter, Gauge, type Registry } from "../net/prometheus.ts";
import { countOpenFds, readTextFileSync as libcRead } from "../ffi/libc_files.ts";

const PAGE = 4096;
const TICKS = 100; // USER_HZ

/** What /proc says about this process; undefined fields could not be read. */
export interface ProcSample {
  /** User plus system CPU time, seconds. */
  cpuSeconds?: number;
  /** Resident set size, bytes. */
  residentBytes?: number;
  /** Virtual memory size, bytes. */
  virtualBytes?: number;
  /** Start time since the Unix epoch, seconds. */
  startTimeSeconds?: number;
  /** Open file descriptors. */
  openFds?: number;
  /** The soft limit on open file descriptors. */
  maxFds?: number;
}

/** Deno refuses /proc/self without --allow-all, which the agent does not ask for: libc reads. */
function read(path: string): string | undefined {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    try {
      return libcRead(path);
    } catch {
      return undefined;
    }
  }
}

/** Parses /proc/[pid]/stat (fields after the command name), /proc/stat's btime and limits. */
export function parseProc(
  stat: string | undefined,
  procStat: string | undefined,
  limits: string | undefined,
): ProcSample {
  const out: ProcSample = {};
  if (stat) {
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    const f = stat.slice(stat.lastIndexOf(")") + 2).trim().split(/\s+/);
    // f[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24.
    out.cpuSeconds = (Number(f[11]) + Number(f[12])) / TICKS;
    out.virtualBytes = Number(f[20]);
    out.residentBytes = Number(f[21]) * PAGE;
    const btime = procStat?.match(/^btime (\d+)$/m);
    if (btime) out.startTimeSeconds = Number(btime[1]) + Number(f[19]) / TICKS;
  }
  const m = limits?.match(/^Max open files\s+(\S+)/m);
  if (m) out.maxFds = m[1] === "unlimited" ? Infinity : Number(m[1]);
  return out;
}

/** Reads this process's figures now. */
function sampleProc(): ProcSample {
  const s = parseProc(read("/proc/self/stat"), read("/proc/stat"), read("/proc/self/limits"));
  const fdSize = read("/proc/self/status")?.match(/^FDSize:\s+(\d+)/m);
  try {
    if (fdSize) s.openFds = countOpenFds(Number(fdSize[1]));
  } catch { /* no libc (unit tests refuse native loading) */ }
  return s;
}

/** Registers the process and heap collectors on `registry`. */
export function registerProcessMetrics(registry: Registry, sample = sampleProc): void {
  let last: ProcSample = {};
  let lastAt = 0;
  // One /proc read per scrape, shared by the six families.
  const now = () => {
    if (Date.now() - lastAt > 100) {
      last = sample();
      lastAt = Date.now();
    }
    return last;
  };
  const registers = [registry];
  new Counter({
    name: "process_cpu_seconds_total",
    help: "Total user and system CPU time spent in seconds.",
    registers,
    collect() {
      const v = now().cpuSeconds;
      if (v !== undefined) {
        this.reset();
        this.inc(v);
      }
    },
  });
  const gauge = (name: string, help: string, pick: (s: ProcSample) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const v = pick(now());
        if (v !== undefined) this.set(v);
      },
    });
  gauge("process_resident_memory_bytes", "Resident memory size in bytes.", (s) => s.residentBytes);
  gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", (s) => s.virtualBytes);
  gauge(
    "process_start_time_seconds",
    "Start time of the process since unix epoch in seconds.",
    (s) => s.startTimeSeconds,
  );
  gauge("process_open_fds", "Number of open file descriptors.", (s) => s.openFds);
  gauge("process_max_fds", "Maximum number of open file descriptors.", (s) => s.maxFds);
  const heap = (name: string, help: string, pick: (m: Deno.MemoryUsage) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(pick(Deno.memoryUsage()));
      },
    });
  heap("nodejs_heap_size_total_bytes", "Process heap size from V8 in bytes.", (m) => m.heapTotal);
  heap(
    "nodejs_heap_size_used_bytes",
    "Process heap size used from V8 in bytes.",
    (m) => m.heapUsed,
  );
  heap(
    "nodejs_external_memory_bytes",
    "V8 external memory size in bytes (buffers held by JavaScript objects).",
    (m) => m.external,
  );
}
