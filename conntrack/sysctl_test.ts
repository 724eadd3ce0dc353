import assert from "node:assert/strict";
import {
  applyConntrackSysctls,
  CONNTRACK_MAX_CAP,
  conntrackMax,
  type ConntrackSysctlConfig,
} from "./sysctl.ts";

const NF = "net/netfilter";
const HASH = "nf_conntrack/parameters/hashsize";

const CFG: ConntrackSysctlConfig = {
  maxPerCore: 32768,
  min: 131072,
  tcpEstablishedTimeoutSeconds: 86400,
  tcpCloseWaitTimeoutSeconds: 3600,
  tcpBeLiberal: false,
  udpTimeoutSeconds: 0,
  udpStreamTimeoutSeconds: 0,
};

/** A fake /proc/sys and /sys/module in a temp dir, with the kernel's usual defaults. */
function fakeTree(values: Record<string, number> = {}) {
  const root = Deno.makeTempDirSync({ prefix: "knp-sysctl-" });
  const procSys = `${root}/proc/sys`, sysModule = `${root}/sys/module`;
  const files: Record<string, number> = {
    [`${procSys}/${NF}/nf_conntrack_max`]: 65536,
    [`${procSys}/${NF}/nf_conntrack_tcp_timeout_established`]: 432000,
    [`${procSys}/${NF}/nf_conntrack_tcp_timeout_close_wait`]: 60,
    [`${procSys}/${NF}/nf_conntrack_tcp_be_liberal`]: 0,
    [`${procSys}/${NF}/nf_conntrack_udp_timeout`]: 30,
    [`${procSys}/${NF}/nf_conntrack_udp_timeout_stream`]: 120,
    [`${sysModule}/${HASH}`]: 16384,
  };
  for (const [k, v] of Object.entries(values)) files[`${root}/${k}`] = v;
  for (const [path, v] of Object.entries(files)) {
    Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    Deno.writeTextFileSync(path, `${v}\n`);
  }
  const read = (rel: string) => Number(Deno.readTextFileSync(`${root}/${rel}`).trim());
  return {
    root,
    procSys,
    sysModule,
    read,
    [Symbol.dispose]: () => Deno.removeSync(root, { recursive: true }),
  };
}

Deno.test("conntrackMax scales by CPUs, floors at min, 0 leaves alone", () => {
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 2), 131072);
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 8), 262144);
  assert.equal(conntrackMax({ maxPerCore: 0, min: 131072 }, 8), 0);
});

Deno.test("applyConntrackSysctls sets max, raises hashsize to max/4, sets timeouts", () => {
  using t = fakeTree();
  const logs: string[] = [];
  const res = applyConntrackSysctls(CFG, { ...t, cpus: 8, log: (m) => logs.push(m) });
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_max`), 262144);
  assert.equal(t.read(`sys/module/${HASH}`), 65536);
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_tcp_timeout_established`), 86400);
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_tcp_timeout_close_wait`), 3600);
  // Zero / false: untouched.
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_tcp_be_liberal`), 0);
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_udp_timeout`), 30);
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_udp_timeout_stream`), 120);
  assert.deepEqual(res.changed.map((c) => [c.path.slice(t.root.length), c.from, c.to]), [
    [`/proc/sys/${NF}/nf_conntrack_max`, 65536, 262144],
    [`/sys/module/${HASH}`, 16384, 65536],
    [`/proc/sys/${NF}/nf_conntrack_tcp_timeout_established`, 432000, 86400],
    [`/proc/sys/${NF}/nf_conntrack_tcp_timeout_close_wait`, 60, 3600],
  ]);
  assert.equal(logs.length, 4);
  // A second run changes nothing.
  assert.deepEqual(applyConntrackSysctls(CFG, { ...t, cpus: 8 }).changed, []);
});

Deno.test("applyConntrackSysctls: liberal, UDP timeouts, never lowers hashsize", () => {
  using t = fakeTree({ [`sys/module/${HASH}`]: 1048576 });
  applyConntrackSysctls({
    ...CFG,
    maxPerCore: 0,
    tcpEstablishedTimeoutSeconds: 0,
    tcpCloseWaitTimeoutSeconds: 0,
    tcpBeLiberal: true,
    udpTimeoutSeconds: 60,
    udpStreamTimeoutSeconds: 300,
  }, { ...t, cpus: 2 });
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_max`), 65536); // maxPerCore 0: alone
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_tcp_be_liberal`), 1);
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_udp_timeout`), 60);
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_udp_timeout_stream`), 300);
  applyConntrackSysctls(CFG, { ...t, cpus: 2 });
  assert.equal(t.read(`sys/module/${HASH}`), 1048576);
});

Deno.test("applyConntrackSysctls logs a read-only tree once and carries on", () => {
  using t = fakeTree();
  const logs: string[] = [];
  const readOnly = Object.assign(new Error("Read-only file system (os error 30)"), {
    code: "EROFS",
  });
  const res = applyConntrackSysctls(CFG, {
    ...t,
    cpus: 8,
    log: (m) => logs.push(m),
    io: {
      readTextFileSync: (p) => Deno.readTextFileSync(p),
      writeTextFileSync: (p, s) => {
        if (p.startsWith(t.procSys)) throw readOnly;
        Deno.writeTextFileSync(p, s);
      },
    },
  });
  assert.equal(logs.filter((m) => /is read-only here/.test(m)).length, 1);
  assert.equal(res.notWritable.length, 3); // max and both TCP timeouts
  // /sys was writable, but the hash size grows only with a table that grew (upstream's SetMax).
  assert.equal(t.read(`sys/module/${HASH}`), 16384);
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_max`), 65536);
});

Deno.test("a file only the initial netns may write is skipped alone, the rest is set", () => {
  using t = fakeTree();
  const logs: string[] = [];
  const denied = Object.assign(new Error("Permission denied"), { code: "EACCES" });
  const res = applyConntrackSysctls(CFG, {
    ...t,
    cpus: 8,
    log: (m) => logs.push(m),
    io: {
      readTextFileSync: (p) => Deno.readTextFileSync(p),
      writeTextFileSync: (p, s) => {
        if (p.endsWith("nf_conntrack_max")) throw denied;
        Deno.writeTextFileSync(p, s);
      },
    },
  });
  assert.deepEqual(res.notWritable.map((p) => p.split("/").pop()), ["nf_conntrack_max"]);
  assert.ok(logs.some((m) => /cannot set .*nf_conntrack_max/.test(m)));
  assert.ok(res.changed.some((c) => c.path.endsWith("tcp_timeout_established")));
});

Deno.test("applyConntrackSysctls fails clearly on a missing file, an I/O error or bad config", () => {
  using t = fakeTree();
  Deno.removeSync(`${t.procSys}/${NF}/nf_conntrack_max`);
  assert.throws(
    () => applyConntrackSysctls(CFG, { ...t, cpus: 1 }),
    /nf_conntrack_max: not found \(is the nf_conntrack module loaded\?\)/,
  );
  assert.throws(
    () => applyConntrackSysctls({ ...CFG, udpTimeoutSeconds: -1 }, { ...t, cpus: 1 }),
    /conntrack.udpTimeout must be a non-negative whole number, got -1/,
  );
  const io = {
    readTextFileSync: () => "1\n",
    writeTextFileSync: () => {
      throw Object.assign(new Error("Input/output error"), { code: "EIO" });
    },
  };
  assert.throws(
    () => applyConntrackSysctls({ ...CFG, maxPerCore: 0 }, { ...t, cpus: 1, io }),
    /cannot write 86400 to .*tcp_timeout_established: Input\/output error/,
  );
});

Deno.test("conntrackMax is capped at 1,048,576 (kube-proxy 1.36), min included", () => {
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 32), CONNTRACK_MAX_CAP);
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 96), 1_048_576);
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 31), 1_015_808);
  assert.equal(conntrackMax({ maxPerCore: 1, min: 4_000_000 }, 1), 1_048_576);
});

Deno.test("nf_conntrack_max already higher is never lowered, and not written (1.38)", () => {
  using t = fakeTree({ [`proc/sys/${NF}/nf_conntrack_max`]: 2_000_000 });
  const logs: string[] = [];
  const writes: string[] = [];
  const res = applyConntrackSysctls(CFG, {
    ...t,
    cpus: 96, // wants 3,145,728, capped at 1,048,576: below what the node has
    log: (m) => logs.push(m),
    io: {
      readTextFileSync: (p) => Deno.readTextFileSync(p),
      writeTextFileSync: (p, s) => {
        writes.push(p.slice(t.root.length));
        Deno.writeTextFileSync(p, s);
      },
    },
  });
  assert.equal(t.read(`proc/sys/${NF}/nf_conntrack_max`), 2_000_000);
  assert.equal(t.read(`sys/module/${HASH}`), 16384, "hashsize follows only a raised max");
  assert.ok(!writes.some((p) => p.endsWith("nf_conntrack_max")), JSON.stringify(writes));
  assert.ok(
    logs.some((m) => /nf_conntrack_max is already 2000000 \(>= 1048576\); leaving it/.test(m)),
  );
  assert.deepEqual(res.notWritable, []);
  // Equal counts as high enough.
  using u = fakeTree({ [`proc/sys/${NF}/nf_conntrack_max`]: 262144 });
  const r2 = applyConntrackSysctls(CFG, { ...u, cpus: 8 });
  assert.ok(!r2.changed.some((c) => c.path.endsWith("nf_conntrack_max")));
});

Deno.test("a read-only nf_conntrack_max that is high enough is no error at all", () => {
  using t = fakeTree({ [`proc/sys/${NF}/nf_conntrack_max`]: 262144 });
  const denied = Object.assign(new Error("Permission denied"), { code: "EACCES" });
  const res = applyConntrackSysctls({ ...CFG, maxPerCore: 16384 }, {
    ...t,
    cpus: 8, // wants max(131072, 131072): below 262144
    io: {
      readTextFileSync: (p) => Deno.readTextFileSync(p),
      writeTextFileSync: (p, s) => {
        if (p.endsWith("nf_conntrack_max")) throw denied;
        Deno.writeTextFileSync(p, s);
      },
    },
  });
  assert.deepEqual(res.notWritable, []);
});
