/**
 * Real-kernel check that listings survive hash set resizes
 * (ffi/nftables/torn_listing.ts): a verdict map is shrunk and grown again
 * before every listing, so the kernel resizes its bucket table while the
 * listing runs now and then, and every listing must still hold each key
 * exactly once. Runs inside a test network namespace only
 * (tests/e2e/contract_test.ts starts it there with KNP_IN_TEST_NETNS=1).
 *
 * @module
 */
import assert from "node:assert/strict";
import { openNftables } from "../../ffi/nftables/client.ts";
import { tornListingsSeen } from "../../ffi/nftables/torn_listing.ts";
import { type Element, Transaction } from "../../ffi/nftables/types.ts";

const inNetns = Deno.env.get("KNP_IN_TEST_NETNS") === "1";
/** Sizes that cross the bucket table's grow and shrink thresholds every round. */
const ELEMENTS = 120, KEPT = 40, SECONDS = 3;

const key = (i: number) => [`198.18.${i >> 8}.${i & 255}`, "tcp", "80"];
const element = (i: number): Element => ({
  kind: "element",
  map: "m",
  key: key(i),
  value: ["goto c"],
  comment: `ns${i}/a-service-name-long-enough-to-span-dump-messages:http`,
});

Deno.test({
  name: "listing (kernel): every key once while the map is resized under it",
  ignore: !inNetns,
  async fn() {
    const c = openNftables("ip", "knp-torn");
    try {
      const setup = new Transaction().add({ kind: "table" }).add({ kind: "chain", name: "c" })
        .add({
          kind: "map",
          name: "m",
          type: "ipv4_addr . inet_proto . inet_service",
          dataType: "verdict",
        });
      for (let i = 0; i < ELEMENTS; i++) setup.add(element(i));
      await c.run(setup);
      const want = Array.from({ length: ELEMENTS }, (_, i) => key(i).join(" . ")).sort();
      const tornBefore = tornListingsSeen();
      let rounds = 0;
      for (const end = Date.now() + SECONDS * 1000; Date.now() < end; rounds++) {
        const shrink = new Transaction(), grow = new Transaction();
        for (let i = KEPT; i < ELEMENTS; i++) {
          shrink.delete(element(i));
          grow.add(element(i));
        }
        await c.run(shrink);
        await c.run(grow);
        const got = (await c.listElements("map", "m")).map((e) => e.key.join(" . ")).sort();
        assert.deepEqual(got, want, `round ${rounds}: the listing is not the map`);
      }
      console.log(
        `${rounds} listings whole; ${tornListingsSeen() - tornBefore} torn reads retried`,
      );
    } finally {
      await c.run(new Transaction().delete({ kind: "table" })).catch(() => {});
      c.close();
    }
  },
});
