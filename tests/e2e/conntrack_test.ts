/**
 * Real-kernel tests of the conntrack FFI client. Each test gets a fresh
 * network namespace; entries are loaded there with `conntrack -I`, the client
 * runs as a child Deno process inside it (fixtures/ct_ops.ts), and results are
 * checked against `conntrack -L`.
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, type Netns, repoRoot, withNetns } from "../netns.ts";
import type { ConntrackEntry, DeleteResult, DumpResult } from "../../ffi/conntrack/types.ts";
import type { CtOp } from "./fixtures/ct_ops.ts";

const FIXTURE = `${repoRoot}/tests/e2e/fixtures/ct_ops.ts`;

/** What a test asks `conntrack -I` to create. */
interface Flow {
  proto: "udp" | "tcp";
  src: string;
  dst: string;
  sport: number;
  dport: number;
  rsrc: string;
  rdst: string;
  rsport: number;
  rdport: number;
  mark?: number;
  zone?: number;
}

function insertArgs(f: Flow): string[] {
  const args = ["-I", "-p", f.proto, "-s", f.src, "-d", f.dst, "--sport", `${f.sport}`];
  args.push("--dport", `${f.dport}`, "--reply-src", f.rsrc, "--reply-dst", f.rdst);
  args.push("--reply-port-src", `${f.rsport}`, "--reply-port-dst", `${f.rdport}`, "-t", "120");
  if (f.proto === "tcp") args.push("--state", "ESTABLISHED");
  if (f.mark !== undefined) args.push("-m", `${f.mark}`);
  if (f.zone !== undefined) args.push("-w", `${f.zone}`);
  return args;
}

/** Creates entries; explains the usual cause when the kernel refuses. */
async function insert(ns: Netns, flows: Flow[]): Promise<void> {
  for (const f of flows) {
    const r = await ns.exec(["conntrack", ...insertArgs(f)], { check: false });
    if (r.code !== 0) {
      const loaded = await ns.exec(["test", "-e", "/proc/sys/net/netfilter/nf_conntrack_max"], {
        check: false,
      });
      throw new Error(
        `conntrack -I ${insertArgs(f).join(" ")} failed: ${r.stderr.trim()}` +
          (loaded.code !== 0
            ? " (nf_conntrack is not loaded: run `modprobe nf_conntrack nf_conntrack_netlink`)"
            : ""),
      );
    }
  }
}

/** A flow as `conntrack -L -o id` prints it. */
interface Listed {
  proto: string;
  origSrc: string;
  origDst: string;
  origSport: number;
  origDport: number;
  replySrc: string;
  replyDst: string;
  replySport: number;
  replyDport: number;
  mark: number;
  zone: number;
  id: number;
}

/** Lists one family with the conntrack tool, as the independent reference. */
async function list(ns: Netns, family: 4 | 6): Promise<Listed[]> {
  const r = await ns.exec(["conntrack", "-L", "-f", family === 4 ? "ipv4" : "ipv6", "-o", "id"]);
  return r.stdout.split("\n").filter((l) => l.trim() !== "").map((line) => {
    const words = line.trim().split(/\s+/);
    const kv = (key: string, nth: number) =>
      words.filter((w) => w.startsWith(key + "="))[nth]?.slice(key.length + 1);
    return {
      proto: words[0],
      origSrc: kv("src", 0)!,
      origDst: kv("dst", 0)!,
      origSport: Number(kv("sport", 0)),
      origDport: Number(kv("dport", 0)),
      replySrc: kv("src", 1)!,
      replyDst: kv("dst", 1)!,
      replySport: Number(kv("sport", 1)),
      replyDport: Number(kv("dport", 1)),
      mark: Number(kv("mark", 0) ?? 0),
      zone: Number(kv("zone", 0) ?? 0),
      id: Number(kv("id", 0)),
    };
  });
}

/** Runs client ops in a child Deno inside the namespace. */
async function ops(ns: Netns, script: CtOp[], exact = true): Promise<unknown[]> {
  const r = await ns.exec([denoBin, "run", "-A", FIXTURE], {
    stdin: JSON.stringify({ exact, ops: script }),
  });
  const out = JSON.parse(r.stdout) as unknown[];
  assert.deepEqual(out.at(-1), { exactDeletes: exact }, "delete path the fixture used");
  return out.slice(0, -1);
}

type DumpOut = { result: DumpResult; entries: ConntrackEntry[] };

const PROTO = { udp: 17, tcp: 6 } as const;

const FLOWS: Flow[] = [
  // A DNATed UDP service flow: the reply comes from the endpoint.
  {
    proto: "udp",
    src: "198.18.0.1",
    dst: "198.18.10.1",
    sport: 40001,
    dport: 53,
    rsrc: "198.18.5.5",
    rdst: "198.18.0.1",
    rsport: 5353,
    rdport: 40001,
    mark: 5,
  },
  {
    proto: "tcp",
    src: "198.18.0.2",
    dst: "198.18.10.2",
    sport: 40002,
    dport: 80,
    rsrc: "198.18.5.6",
    rdst: "198.18.0.2",
    rsport: 8080,
    rdport: 40002,
  },
  {
    proto: "udp",
    src: "2001:db8::1",
    dst: "2001:db8:10::1",
    sport: 40003,
    dport: 53,
    rsrc: "2001:db8:5::5",
    rdst: "2001:db8::1",
    rsport: 5353,
    rdport: 40003,
    zone: 7,
  },
  {
    proto: "tcp",
    src: "2001:db8::2",
    dst: "2001:db8:10::2",
    sport: 40004,
    dport: 443,
    rsrc: "2001:db8:5::6",
    rdst: "2001:db8::2",
    rsport: 8443,
    rdport: 40004,
    mark: 9,
  },
];

/** The entry the client should report for `f`, given the id the kernel assigned. */
function expected(f: Flow, id: number): ConntrackEntry {
  return {
    family: f.src.includes(":") ? 6 : 4,
    proto: PROTO[f.proto],
    origSrc: f.src,
    origDst: f.dst,
    origSport: f.sport,
    origDport: f.dport,
    replySrc: f.rsrc,
    replyDst: f.rdst,
    replySport: f.rsport,
    replyDport: f.rdport,
    mark: f.mark ?? 0,
    zone: f.zone ?? 0,
    id,
  };
}

const byKey = (e: { origSrc: string; origSport: number }) => `${e.origSrc}/${e.origSport}`;
const sorted = <T extends { origSrc: string; origSport: number }>(xs: T[]) =>
  [...xs].sort((a, b) => byKey(a).localeCompare(byKey(b)));

e2eTest("conntrack dump reports every field of IPv4 and IPv6 UDP/TCP entries", async () => {
  await withNetns(1, async (ns) => {
    await insert(ns, FLOWS);
    const ids = new Map<string, number>();
    for (const fam of [4, 6] as const) {
      for (const l of await list(ns, fam)) ids.set(byKey(l), l.id);
    }
    assert.equal(ids.size, 4, "conntrack -L shows the 4 loaded flows");
    const [d4, d6, udp4, tcp6, udp6] = await ops(ns, [
      { op: "dump", family: 4 },
      { op: "dump", family: 6 },
      { op: "dump", family: 4, proto: 17 },
      { op: "dump", family: 6, proto: 6 },
      { op: "dump", family: 6, proto: 17 },
    ]) as DumpOut[];
    const want = (fam: 4 | 6, proto?: number) =>
      sorted(
        FLOWS.map((f) => expected(f, ids.get(`${f.src}/${f.sport}`)!))
          .filter((e) => e.family === fam && (proto === undefined || e.proto === proto)),
      );
    assert.deepEqual(d4.result, { count: 2, interrupted: false });
    assert.deepEqual(sorted(d4.entries), want(4));
    assert.deepEqual(d6.result, { count: 2, interrupted: false });
    assert.deepEqual(sorted(d6.entries), want(6));
    assert.deepEqual(udp4.entries, want(4, 17));
    assert.equal(udp4.result.count, 1);
    assert.deepEqual(tcp6.entries, want(6, 6));
    assert.deepEqual(udp6.entries, want(6, 17));

    // A portless protocol: ports read as 0, nothing else breaks.
    await ns.exec([
      "conntrack",
      "-I",
      "-p",
      "icmp",
      "-s",
      "198.18.0.7",
      "-d",
      "198.18.10.7",
      "--icmp-type",
      "8",
      "--icmp-code",
      "0",
      "--icmp-id",
      "77",
      "-t",
      "30",
    ]);
    const [icmp, all4] = await ops(ns, [
      { op: "dump", family: 4, proto: 1 },
      { op: "dump", family: 4 },
    ]) as DumpOut[];
    assert.equal(icmp.entries.length, 1);
    assert.deepEqual(
      { ...icmp.entries[0], id: 0 },
      {
        family: 4,
        proto: 1,
        origSrc: "198.18.0.7",
        origDst: "198.18.10.7",
        origSport: 0,
        origDport: 0,
        replySrc: "198.18.10.7",
        replyDst: "198.18.0.7",
        replySport: 0,
        replyDport: 0,
        mark: 0,
        zone: 0,
        id: 0,
      },
    );
    assert.equal(all4.result.count, 3);
  });
});

e2eTest("conntrack delete removes exactly the chosen entries", async () => {
  await withNetns(1, async (ns) => {
    // 24 UDP flows per family, plus the mixed set.
    const many: Flow[] = [];
    for (let i = 0; i < 24; i++) {
      many.push({ ...FLOWS[0], sport: 41000 + i, rdport: 41000 + i, mark: undefined });
      many.push({ ...FLOWS[2], sport: 41000 + i, rdport: 41000 + i, zone: undefined });
    }
    await insert(ns, [...FLOWS, ...many]);
    const [d4, d6] = await ops(ns, [
      { op: "dump", family: 4 },
      { op: "dump", family: 6 },
    ]) as DumpOut[];
    const all = [...d4.entries, ...d6.entries];
    assert.equal(all.length, 52);
    // Every third entry, which mixes families, protocols, marks and zones.
    const chosen = all.filter((_, i) => i % 3 === 0);
    const [res] = await ops(ns, [{ op: "delete", entries: chosen }]) as DeleteResult[];
    assert.deepEqual(res, { deleted: chosen.length, failed: [] });
    const left = [...await list(ns, 4), ...await list(ns, 6)];
    const gone = new Set(chosen.map((e) => e.id));
    assert.deepEqual(
      left.map((l) => l.id).sort(),
      all.filter((e) => !gone.has(e.id)).map((e) => e.id).sort(),
    );
  });
});

e2eTest("conntrack delete with an old id spares a flow re-created on the same tuple", async () => {
  await withNetns(1, async (ns) => {
    const flow = FLOWS[0];
    await insert(ns, [flow]);
    const [{ entries: [old] }] = await ops(ns, [{ op: "dump", family: 4 }]) as DumpOut[];
    const [first] = await ops(ns, [{ op: "delete", entries: [old] }]) as DeleteResult[];
    assert.deepEqual(first, { deleted: 1, failed: [] });
    // The kernel derives the id from the object's address: a flow allocated
    // right after the delete reuses the freed object and thus the old id.
    // Filler flows take that slot, so the re-created flow gets a new id.
    let fresh: Listed | undefined;
    for (let i = 0; i < 20 && fresh === undefined; i++) {
      await insert(ns, [{ ...flow, sport: 50000 + i, rdport: 50000 + i }, flow]);
      const same = (await list(ns, 4)).find((l) => l.origSport === flow.sport);
      if (same !== undefined && same.id !== old.id) fresh = same;
      else {await ns.exec(["conntrack", "-D", "-p", "udp", "--sport", `${flow.sport}`], {
          check: false,
        });}
    }
    assert.ok(fresh !== undefined, "could not get the kernel to assign a new id");

    const [stale] = await ops(ns, [{ op: "delete", entries: [old] }]) as DeleteResult[];
    assert.equal(stale.deleted, 0);
    assert.equal(stale.failed.length, 1);
    assert.match(stale.failed[0].error, /^ENOENT/);
    const still = (await list(ns, 4)).find((l) => l.origSport === flow.sport);
    assert.equal(still?.id, fresh.id, "the re-created flow survives");

    // The nfct_query fallback matches on the tuple alone: the race is real there.
    const [racy] = await ops(ns, [{ op: "delete", entries: [old] }], false) as DeleteResult[];
    assert.deepEqual(racy, { deleted: 1, failed: [] });
    assert.equal((await list(ns, 4)).find((l) => l.origSport === flow.sport), undefined);
  });
});

e2eTest("conntrack delete reports entries already gone as failed, not thrown", async () => {
  await withNetns(1, async (ns) => {
    await insert(ns, FLOWS);
    const [d4, d6] = await ops(ns, [
      { op: "dump", family: 4 },
      { op: "dump", family: 6 },
    ]) as DumpOut[];
    const all = [...d4.entries, ...d6.entries];
    const ghost: ConntrackEntry = { ...all[0], origSport: 1, id: 0 }; // never existed
    for (const exact of [true, false]) {
      const [r] = await ops(
        ns,
        [{ op: "delete", entries: [all[0], all[2], ghost] }],
        exact,
      ) as DeleteResult[];
      // First pass deletes two; the second finds everything gone.
      assert.equal(r.deleted, exact ? 2 : 0, `exact=${exact}`);
      assert.deepEqual(
        r.failed.map((f) => [byKey(f.entry), f.error.split(" ")[0]]),
        (exact ? [ghost] : [all[0], all[2], ghost]).map((e) => [byKey(e), "ENOENT"]),
      );
    }
    assert.equal((await list(ns, 4)).length + (await list(ns, 6)).length, 2);
  });
});

e2eTest("conntrack delete spans many netlink batches and counts every ack", async () => {
  await withNetns(1, async (ns) => {
    // More entries than one sendto carries, loaded in one go with conntrack -R.
    const lines: string[] = [];
    for (let i = 0; i < 1500; i++) {
      lines.push(
        `-I -p udp -s 198.18.${1 + (i >> 8)}.${i & 255} -d 198.19.0.1 --sport ${
          10000 + i
        } --dport 53 -t 120`,
      );
    }
    const file = await Deno.makeTempFile({ suffix: ".ct" });
    try {
      await Deno.writeTextFile(file, lines.join("\n") + "\n");
      await ns.exec(["conntrack", "-R", file]);
    } finally {
      await Deno.remove(file);
    }
    const [d] = await ops(ns, [{ op: "dump", family: 4 }]) as DumpOut[];
    assert.equal(d.result.count, 1500);
    // Delete 1000, then all 1500: the second call must find exactly 1000 gone.
    const [first, second] = await ops(ns, [
      { op: "delete", entries: d.entries.slice(0, 1000) },
      { op: "delete", entries: d.entries },
    ]) as DeleteResult[];
    assert.deepEqual(first, { deleted: 1000, failed: [] });
    assert.equal(second.deleted, 500);
    assert.equal(second.failed.length, 1000);
    assert.ok(second.failed.every((f) => f.error.startsWith("ENOENT")));
    assert.deepEqual(
      new Set(second.failed.map((f) => f.entry.id)),
      new Set(d.entries.slice(0, 1000).map((e) => e.id)),
    );
    assert.equal((await list(ns, 4)).length, 0);
  });
});

e2eTest("conntrack client rejects bad input and survives a throwing visitor", async () => {
  await withNetns(1, async (ns) => {
    await insert(ns, FLOWS);
    const [d4] = await ops(ns, [{ op: "dump", family: 4 }]) as DumpOut[];
    const bad = { ...d4.entries[0], origDst: "198.18.0.300" };
    const [rejected, thrown, after] = await ops(ns, [
      { op: "delete", entries: [d4.entries[1], bad] },
      { op: "dumpThrow", family: 4 },
      { op: "dump", family: 4 },
    ]) as [{ thrown: string; name: string }, { thrown: string }, DumpOut];
    assert.equal(rejected.name, "TypeError");
    assert.match(
      rejected.thrown,
      /entry 1: origDst "198\.18\.0\.300" is not an IPv4 address; nothing/,
    );
    assert.equal(thrown.thrown, "visitor failed on purpose");
    assert.equal(after.result.count, 2, "nothing deleted, and the handle still dumps");
  });
});
