/**
 * Real-kernel check of the conntrack sysctls (kube-proxy 1.36-1.38: nf_conntrack_max capped
 * at 1,048,576 and never lowered). Runs the agent's code (fixtures/sysctl_apply.ts) inside a
 * fresh network namespace against the real /proc/sys.
 *
 * What the kernel allows here (6.x): outside the initial namespace nf_conntrack_max is
 * mode 0444 (a child namespace shares the initial one's limit; writing gives EACCES), the
 * timeouts are per namespace and writable, and /sys/module/nf_conntrack/parameters/hashsize
 * is global (taken from the initial namespace only). So this test shows, on the kernel:
 * a wanted size at or below the namespace's value leads to no write at all (the 1.38 rule,
 * which is what keeps an unwritable node quiet), a larger one is tried, refused and
 * reported without stopping the timeouts, and the timeouts land in the namespace only.
 * That an already higher value is left alone where it *is* writable, and the cap, are shown
 * through an injected tree in conntrack/sysctl_test.ts: the host's own value is never written.
 *
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, type Netns, repoRoot, withNetns } from "../netns.ts";
import type { SysctlResult } from "../../conntrack/sysctl.ts";

const FIX = `${repoRoot}/tests/e2e/fixtures/sysctl_apply.ts`;
const NF = "/proc/sys/net/netfilter";

type Out = SysctlResult & { logs: string[]; error?: string };

async function apply(ns: Netns, cfg: Record<string, unknown>, cpus: number, sysModule: string) {
  const base = {
    maxPerCore: 32768,
    min: 131072,
    tcpEstablishedTimeoutSeconds: 0,
    tcpCloseWaitTimeoutSeconds: 0,
    tcpBeLiberal: false,
    udpTimeoutSeconds: 0,
    udpStreamTimeoutSeconds: 0,
  };
  const arg = JSON.stringify({ cfg: { ...base, ...cfg }, cpus, sysModule });
  const r = await ns.exec([denoBin, "run", "-A", FIX, ns.name, arg]);
  const out = JSON.parse(r.stdout.trim().split("\n").pop()!) as Out;
  assert.equal(out.error, undefined, `${out.error}\n${out.logs.join("\n")}`);
  return out;
}

const read = async (ns: Netns | undefined, path: string) =>
  Number(
    (ns ? (await ns.exec(["cat", path])).stdout : await Deno.readTextFile(path)).trim(),
  );

e2eTest(
  "conntrack sysctls in a network namespace: max never lowered, refused raise reported",
  async () => {
    await withNetns(1, async (ns) => {
      // Load conntrack in the namespace (the files appear with the first use).
      await ns.exec(["conntrack", "-L"], { check: false });
      const mode = (await ns.exec(["stat", "-c", "%a", `${NF}/nf_conntrack_max`])).stdout.trim();
      const nsMax = await read(ns, `${NF}/nf_conntrack_max`);
      const hostUdp = await read(undefined, `${NF}/nf_conntrack_udp_timeout`);
      const hostHash = await read(undefined, "/sys/module/nf_conntrack/parameters/hashsize");
      console.log(`    namespace nf_conntrack_max ${nsMax}, mode ${mode}`);
      const tmp = await Deno.makeTempDir({ prefix: "knp-sysmod-" });
      try {
        const hashFile = `${tmp}/nf_conntrack/parameters/hashsize`;
        await Deno.mkdir(`${tmp}/nf_conntrack/parameters`, { recursive: true });
        await Deno.writeTextFile(hashFile, "1024\n");
        const udp = hostUdp === 47 ? 48 : 47;

        // 1. The computed size (max(2 x 1000, 131072)) is below what the namespace has: no
        //    write is even tried, so nothing is "not writable", and the timeout is set.
        const low = await apply(ns, { maxPerCore: 1000, udpTimeoutSeconds: udp }, 2, tmp);
        assert.ok(131072 <= nsMax, `this test needs nf_conntrack_max >= 131072, got ${nsMax}`);
        assert.deepEqual(low.notWritable, [], JSON.stringify(low));
        assert.ok(low.logs.some((l) => /nf_conntrack_max is already \d+ \(>= 131072\)/.test(l)));
        assert.deepEqual(low.changed.map((c) => c.path), [`${NF}/nf_conntrack_udp_timeout`]);
        assert.equal(await read(ns, `${NF}/nf_conntrack_udp_timeout`), udp);
        assert.equal(await read(undefined, `${NF}/nf_conntrack_udp_timeout`), hostUdp, "host kept");

        // 2. 96 CPUs x 32768 wants 3,145,728, capped to 1,048,576: above the namespace's value,
        //    so the write is tried; the kernel refuses it outside the initial namespace.
        const high = await apply(ns, { tcpCloseWaitTimeoutSeconds: 61 }, 96, tmp);
        if (mode === "444") {
          assert.deepEqual(high.notWritable, [`${NF}/nf_conntrack_max`], JSON.stringify(high));
          assert.ok(high.logs.some((l) => /cannot set .*nf_conntrack_max to 1048576/.test(l)));
          assert.equal(await read(ns, `${NF}/nf_conntrack_max`), nsMax);
          // The hash size follows only a table that grew: the copy is untouched.
          assert.equal(Number((await Deno.readTextFile(hashFile)).trim()), 1024);
        } else {
          // A kernel that lets a child namespace size its own table.
          assert.equal(await read(ns, `${NF}/nf_conntrack_max`), 1048576);
        }
        assert.ok(
          high.changed.some((c) => c.path.endsWith("tcp_timeout_close_wait") && c.to === 61),
        );
        assert.equal(
          await read(undefined, "/sys/module/nf_conntrack/parameters/hashsize"),
          hostHash,
          "the host's hash size is never written",
        );
      } finally {
        await Deno.remove(tmp, { recursive: true });
      }
    });
  },
);
