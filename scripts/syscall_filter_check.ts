/**
 * Runs the real agent under the systemd unit's `SystemCallFilter=` (deploy/systemd), applied as
 * systemd applies it (a seccomp filter; refused calls fail with EPERM, SystemCallErrorNumber),
 * in a throwaway network namespace against the fake API server, and checks that it does its
 * whole job: syncs rules into the kernel, serves /healthz and /metrics, writes the conntrack
 * sysctls, cleans conntrack entries, and exits 0 on SIGTERM, with no error logged.
 *
 * Needs root, iproute2, systemd-analyze (to expand the unit's @groups) and libseccomp.so.2.
 * Usage: `./denow run -A scripts/syscall_filter_check.ts [unit-file]`. The systemd machinery
 * itself (capabilities, ProtectSystem, ...) is not reproduced: only the system call filter.
 *
 * @module
 */
import { Netns } from "../tests/netns.ts";
import { FakeApiServer } from "../tests/fakeapi/server.ts";
import { startTaskCommand } from "../tests/e2e/fixtures/agent_process.ts";
import { dlopen } from "../ffi/native.ts";

const SELF = new URL(import.meta.url).pathname;

/** A group's system calls, its nested groups expanded (`systemd-analyze syscall-filter`). */
function expand(name: string, seen = new Set<string>()): string[] {
  if (!name.startsWith("@")) return [name];
  if (seen.has(name)) return [];
  seen.add(name);
  const out = new Deno.Command("systemd-analyze", { args: ["syscall-filter", name] }).outputSync();
  if (!out.success) throw new Error(`systemd-analyze syscall-filter ${name} failed`);
  return new TextDecoder().decode(out.stdout).split("\n").slice(1)
    .map((l) => l.trim()).filter((l) => l && !l.startsWith("#"))
    .flatMap((l) => expand(l, seen));
}

/** The unit's filter as systemd builds it: the first line picks allow- or deny-list. */
export function unitFilter(unit: string): { allow: boolean; calls: Set<string> } {
  const lines = unit.split("\n").filter((l) => l.startsWith("SystemCallFilter="))
    .map((l) => l.slice("SystemCallFilter=".length).trim());
  if (!lines.length) throw new Error("the unit has no SystemCallFilter=");
  const allow = !lines[0].startsWith("~");
  const calls = new Set<string>();
  for (const line of lines) {
    const deny = line.startsWith("~");
    for (const g of line.replace(/^~/, "").split(/\s+/).filter(Boolean)) {
      for (const c of expand(g)) {
        // In an allow-list, "~" lines take calls away; in a deny-list every line adds.
        if (allow && deny) calls.delete(c);
        else calls.add(c);
      }
    }
  }
  return { allow, calls };
}

/** Loads the filter into this process (all threads) and runs `cmd` under it. */
async function execFiltered(allow: boolean, callsFile: string, cmd: string[]): Promise<never> {
  const lib = dlopen("libseccomp.so.2", {
    seccomp_init: { parameters: ["u32"], result: "pointer" },
    seccomp_syscall_resolve_name: { parameters: ["buffer"], result: "i32" },
    seccomp_rule_add_array: {
      parameters: ["pointer", "u32", "i32", "u32", "pointer"],
      result: "i32",
    },
    seccomp_attr_set: { parameters: ["pointer", "u32", "u32"], result: "i32" },
    seccomp_load: { parameters: ["pointer"], result: "i32" },
  });
  const ALLOW = 0x7fff0000, EPERM = 0x00050000 | 1;
  const ctx = lib.symbols.seccomp_init(allow ? EPERM : ALLOW);
  let rules = 0;
  for (const name of Deno.readTextFileSync(callsFile).split("\n").filter(Boolean)) {
    const nr = lib.symbols.seccomp_syscall_resolve_name(new TextEncoder().encode(name + "\0"));
    if (nr < 0) continue; // not a call on this architecture
    if (lib.symbols.seccomp_rule_add_array(ctx, allow ? ALLOW : EPERM, nr, 0, null) === 0) rules++;
  }
  // SCMP_FLTATR_CTL_TSYNC: every thread, so whichever thread forks, the agent inherits it.
  if (lib.symbols.seccomp_attr_set(ctx, 4, 1) !== 0) throw new Error("seccomp: TSYNC refused");
  if (lib.symbols.seccomp_load(ctx) !== 0) throw new Error("seccomp_load failed");
  console.error(`filter: ${allow ? "allow" : "deny"}-list of ${rules} calls loaded`);
  const child = new Deno.Command(cmd[0], { args: cmd.slice(1), stdin: "null" }).spawn();
  Deno.addSignalListener("SIGTERM", () => child.kill("SIGTERM"));
  Deno.exit((await child.status).code);
}

async function until(what: string, ok: () => Promise<boolean> | boolean, ms = 30_000) {
  for (const end = Date.now() + ms; !(await ok());) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function get(url: string): Promise<number> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await r.body?.cancel();
    return r.status;
  } catch {
    return 0;
  }
}

/** Inside the namespace: the fake cluster, the filtered agent, the checks. */
type Sh = (...c: string[]) => Deno.CommandOutput;

/** This node and two Services (TCP web, UDP dns), each with one endpoint. */
function seedCluster(api: FakeApiServer, node: string): void {
  api.apply({
    kind: "Node",
    metadata: { name: node },
    spec: { podCIDRs: ["198.18.1.0/24"] },
    status: { addresses: [{ type: "InternalIP", address: "198.18.0.1" }] },
  });
  for (const [name, proto] of [["web", "TCP"], ["dns", "UDP"]]) {
    const ip = name === "web" ? "198.19.0.10" : "198.19.0.53";
    api.apply({
      kind: "Service",
      metadata: { name, namespace: "default" },
      spec: { clusterIP: ip, clusterIPs: [ip], ports: [{ name: "p", protocol: proto, port: 80 }] },
    });
    api.apply({
      kind: "EndpointSlice",
      metadata: {
        name: `${name}-1`,
        namespace: "default",
        labels: { "kubernetes.io/service-name": name },
      },
      addressType: "IPv4",
      ports: [{ name: "p", protocol: proto, port: 8080 }],
      endpoints: [{ addresses: ["198.18.1.5"], conditions: { ready: true } }],
    });
  }
}

/** The agent's command line: the task's deno flags, then the flags under test. */
function agentArgs(kubeconfig: string, node: string): string[] {
  return [
    ...startTaskCommand(),
    `--kubeconfig=${kubeconfig}`,
    `--hostname-override=${node}`,
    "--conntrack-max-per-core=0", // nf_conntrack_max/hashsize are host-wide
    "--conntrack-tcp-timeout-established=23h", // per-namespace: exercises the sysctl writes
    "--conntrack-reconciler-period=1s",
    "--iptables-sync-period=2s",
    "--v=2",
  ];
}

/** A stale UDP flow to the dns Service's ClusterIP, DNATed to its endpoint. */
function insertStaleFlow(sh: Sh): void {
  sh(
    "conntrack",
    "-I",
    "-p",
    "udp",
    "-s",
    "198.18.0.9",
    "-d",
    "198.19.0.53",
    "--sport",
    "5000",
    "--dport",
    "80",
    "--timeout",
    "120",
    "--reply-src",
    "198.18.1.5",
    "--reply-dst",
    "198.18.0.9",
    "--reply-port-src",
    "8080",
    "--reply-port-dst",
    "5000",
  );
}

/** The agent's whole job: health, rules, metrics, the sysctl, and a stale flow deleted. */
async function checkJob(api: FakeApiServer, sh: Sh): Promise<void> {
  await until("/healthz 200", async () => (await get("http://127.0.0.1:10256/healthz")) === 200);
  await until("the rules", () => {
    const o = sh("nft", "list", "table", "ip", "kube-proxy");
    return new TextDecoder().decode(o.stdout).includes("198.19.0.53");
  });
  if ((await get("http://127.0.0.1:10249/metrics")) !== 200) throw new Error("no /metrics");
  const est = Deno.readTextFileSync(
    "/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established",
  );
  if (est.trim() !== String(23 * 3600)) throw new Error(`sysctl not written: ${est}`);
  // A stale UDP flow to the Service: removing its endpoint makes the agent delete it.
  insertStaleFlow(sh);
  api.apply({
    kind: "EndpointSlice",
    metadata: {
      name: "dns-1",
      namespace: "default",
      labels: { "kubernetes.io/service-name": "dns" },
    },
    addressType: "IPv4",
    ports: [{ name: "p", protocol: "UDP", port: 8080 }],
    endpoints: [],
  });
  await until("the stale conntrack entry deleted", () => {
    const o = new TextDecoder().decode(sh("conntrack", "-L", "-d", "198.19.0.53").stdout);
    return !o.includes("198.19.0.53");
  }, 15_000);
  await new Promise((r) => setTimeout(r, 3000)); // a few sync periods and reconciler runs
}

async function inner(allow: boolean, callsFile: string): Promise<void> {
  const sh = (...c: string[]) => new Deno.Command(c[0], { args: c.slice(1) }).outputSync();
  sh("ip", "link", "add", "d0", "type", "dummy");
  sh("ip", "addr", "add", "198.18.0.1/24", "dev", "d0");
  sh("ip", "link", "set", "d0", "up");
  const api = FakeApiServer.start();
  const node = "knp-scf-node";
  seedCluster(api, node);
  const kubeconfig = api.writeKubeconfig();
  const agent = agentArgs(kubeconfig, node);
  const p = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", SELF, "--exec", allow ? "allow" : "deny", callsFile, "--", ...agent],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines: string[] = [];
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const c of s.pipeThrough(new TextDecoderStream())) lines.push(...c.split("\n"));
  };
  const pumps = Promise.all([pump(p.stdout), pump(p.stderr)]);
  let failed = false;
  try {
    await checkJob(api, sh);
  } catch (err) {
    failed = true;
    console.error(`FAIL: ${(err as Error).message}`);
  } finally {
    try {
      p.kill("SIGTERM");
    } catch { /* already exited */ }
    const st = await p.status;
    await pumps;
    await api.close();
    const bad = lines.filter((l) => /^E\d{4} |not permitted|EPERM/i.test(l));
    if (st.code !== 0 || bad.length) failed = true;
    console.error(`agent exit ${st.code}; error lines: ${bad.length}`);
    for (const l of failed ? lines.slice(-60) : bad) console.error(`  ${l}`);
  }
  Deno.exit(failed ? 1 : 0);
}

if (import.meta.main) {
  const [first, ...rest] = Deno.args;
  if (first === "--exec") {
    const [mode, file, _dashes, ...cmd] = rest;
    await execFiltered(mode === "allow", file, cmd);
  } else if (first === "--inner") {
    await inner(rest[0] === "allow", rest[1]);
  } else {
    const unitPath = first ?? new URL("../deploy/systemd/kube-nft-proxy.service", import.meta.url)
      .pathname;
    const { allow, calls } = unitFilter(Deno.readTextFileSync(unitPath));
    const file = Deno.makeTempFileSync({ suffix: ".syscalls" });
    Deno.writeTextFileSync(file, [...calls].sort().join("\n") + "\n");
    const ns = await Netns.create("scf");
    try {
      const st = await ns.spawn([
        Deno.execPath(),
        "run",
        "-A",
        SELF,
        "--inner",
        allow ? "allow" : "deny",
        file,
      ], {
        stdout: "inherit",
        stderr: "inherit",
      }).status;
      console.error(st.code === 0 ? `ok: the agent runs under ${unitPath}'s filter` : "FAILED");
      Deno.exitCode = st.code;
    } finally {
      await ns.delete();
      Deno.removeSync(file);
    }
  }
}
