/**
 * --cleanup-iptables-nft on the real kernel: tests/e2e/iptables_nft_inner.ts in the node
 * namespace of a two-pod topology (issue 20 §9: one step off iptables mode). kube-proxy-shaped
 * rules are written there by the `iptables-nft`/`ip6tables-nft` binaries (test-only use; the
 * agent never runs them), and a legacy table by `iptables-legacy`. Installs Debian's `iptables`
 * package when the binaries are missing.
 * @module
 */
import { e2eTest, run } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";

/** Installs the iptables binaries (iptables-nft, iptables-legacy, the -save tools) if missing. */
async function ensureIptables(): Promise<void> {
  const have = await run(["sh", "-c", "command -v iptables-nft && command -v iptables-legacy"], {
    check: false,
  });
  if (have.code === 0) return;
  await run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "iptables"]);
}

e2eTest(
  "iptables-nft: kube-proxy's iptables rules removed after the first sync, traffic throughout",
  async () => {
    await ensureIptables();
    await runInnerDriver("ipt", "iptables_nft_inner.ts");
  },
);
