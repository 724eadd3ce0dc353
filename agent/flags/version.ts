/**
 * What `--version` prints. Upstream prints `Kubernetes v1.38.0` (verflag: program name, then the
 * version), and `--version=raw` the Go `version.Info` struct. We keep that shape, with our own
 * name and version in the first two words (so `awk '{print $2}'` still finds a version), and say
 * which kube-proxy release the agent follows.
 *
 * @module
 */

/** The agent's release. */
export const AGENT_RELEASE = "v0.1.0";

/** The kube-proxy minor release whose flags, config and nftables layout the agent follows. */
export const KUBE_PROXY_COMPATIBLE = "v1.38";

/** The agent's version string, as logged at start-up. */
export const AGENT_VERSION = `kube-nft-proxy ${AGENT_RELEASE}`;

/** The `--version` output (`raw`: the detailed form). */
export function versionText(raw = false): string {
  if (!raw) return `${AGENT_VERSION} (kube-proxy ${KUBE_PROXY_COMPATIBLE} compatible)`;
  const [major, minor] = AGENT_RELEASE.slice(1).split(".");
  const fields = [
    ["Major", major],
    ["Minor", minor],
    ["GitVersion", AGENT_RELEASE],
    ["KubeProxyCompatible", KUBE_PROXY_COMPATIBLE],
    ["Runtime", `deno ${Deno.version.deno}`],
    ["Platform", `${Deno.build.os}/${Deno.build.arch === "x86_64" ? "amd64" : "arm64"}`],
  ];
  return `version.Info{${fields.map(([k, v]) => `${k}:${JSON.stringify(v)}`).join(", ")}}`;
}
