/**
 * The big-Deployment phase's commit clock (big_deployment.ts), in a process of its own: it
 * subscribes to nf_tables notifications in the namespace it runs in and prints each commit
 * (kernel_commits.ts {@link Commit}) as one JSON line, stamped when its NEWGEN arrived. The bench
 * process holds the fake API server's whole cluster, and its collections delayed its own event
 * loop by up to 160 ms, which a monitor there charged to the agent; this process holds nothing.
 *
 * Prints `{"ready":true}` once subscribed, `{"overrun":true}` when notifications were lost, and
 * exits when its stdin closes. Runs only inside a test namespace (KNP_IN_TEST_NETNS=1).
 *
 * @module
 */
import { NftablesMonitor } from "../../../ffi/nftables/netlink/monitor.ts";
import { now } from "../../support/prober.ts";
import { CommitCollector } from "./kernel_commits.ts";

if (import.meta.main) {
  if (Deno.env.get("KNP_IN_TEST_NETNS") !== "1") {
    console.error("commit_stamper.ts watches nftables: run it from the bench, in a test netns");
    Deno.exit(2);
  }
  const enc = new TextEncoder();
  const out = (line: unknown) => Deno.stdout.writeSync(enc.encode(JSON.stringify(line) + "\n"));
  const monitor = new NftablesMonitor();
  const collector = new CommitCollector();
  monitor.start({
    onForeign: (msgs) => {
      for (const c of collector.feed(msgs, now())) out(c);
    },
    onOverrun: () => out({ overrun: true }),
    onError: (err) => {
      console.error(`commit_stamper: ${err.message}`);
      Deno.exit(1);
    },
  });
  out({ ready: true });
  // Until the bench closes our stdin.
  for await (const _ of Deno.stdin.readable) { /* nothing is sent */ }
  await monitor.stop();
}
