/**
 * Real-kernel check of the notification monitor's socket filter
 * (ffi/nftables/netlink/monitor.ts): the raw writer's socket opens at its
 * first batch, which a cold start sends inside a quiet window (the monitor out
 * of the group), so no notification of it ever reaches the monitor. Its next,
 * small batches must still be filtered in the kernel: none of them may wake the
 * monitor, while another program's change still does. Runs inside a test
 * network namespace only (tests/e2e/contract_test.ts starts it there with
 * KNP_IN_TEST_NETNS=1).
 *
 * @module
 */
import assert from "node:assert/strict";
import { openNftables } from "../../ffi/nftables/client.ts";
import { NftablesMonitor } from "../../ffi/nftables/netlink/monitor.ts";
import { QUIET_MIN_ELEMENTS } from "../../ffi/nftables/netlink/generation.ts";
import type { NftNotification } from "../../ffi/nftables/netlink/notify.ts";
import { type Element, Transaction } from "../../ffi/nftables/types.ts";

const inNetns = Deno.env.get("KNP_IN_TEST_NETNS") === "1";
const TABLE = "knp-filter";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const element = (i: number): Element => ({
  kind: "element",
  set: "s",
  key: [`198.18.${i >> 8}.${i & 255}`],
});

Deno.test({
  name: "monitor (kernel): a socket first used in a quiet window is filtered from its next batch",
  ignore: !inNetns,
  async fn() {
    const monitor = new NftablesMonitor();
    const foreign: NftNotification[] = [];
    monitor.start({ onForeign: (m) => foreign.push(...m), onOverrun: () => {} });
    const c = openNftables("ip", TABLE);
    c.quietWith?.(monitor.quiet);
    try {
      await c.run(
        new Transaction().add({ kind: "table" }).add({ kind: "set", name: "s", type: "ipv4_addr" }),
      );
      // The raw writer's first batch: big enough to leave the group while it commits.
      const big = new Transaction();
      for (let i = 0; i < QUIET_MIN_ELEMENTS + 88; i++) big.add(element(i));
      await c.run(big);
      await sleep(200);
      const before = monitor.ownReceived;
      for (let k = 0; k < 5; k++) {
        await c.run(new Transaction().add(element(1000 + k)).delete(element(k)));
      }
      await sleep(200);
      assert.equal(monitor.ownReceived - before, 0, "our small batches reached the monitor");
      assert.equal(foreign.length, 0, "our own batches were taken for another program's");
      // Another program's change still arrives.
      const nft = await new Deno.Command("nft", {
        args: ["add", "element", "ip", TABLE, "s", "{ 198.18.200.1 }"],
      }).output();
      assert.equal(nft.code, 0, new TextDecoder().decode(nft.stderr));
      for (let t = 0; t < 40 && foreign.length === 0; t++) await sleep(50);
      assert.ok(foreign.some((m) => m.kind === "element"), "the foreign element was not seen");
    } finally {
      await c.run(new Transaction().delete({ kind: "table" })).catch(() => {});
      c.close();
      await monitor.stop();
    }
  },
});
