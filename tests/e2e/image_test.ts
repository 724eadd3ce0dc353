/**
 * The container image, outer half: builds it from the working tree with the recipe
 * (scripts/build-image.sh: bundle or compile, staged root, FROM scratch), checks what is in it
 * (the agent, its libraries, glibc; no shell, no package manager), then runs
 * tests/e2e/image_inner.ts in the node namespace of a fresh topology, which runs the image
 * under podman there. The host's ruleset must be the same at the end: every container joins a
 * test namespace (or none), never podman's default network.
 *
 * Needs root, iproute2, podman and runc (apt-get install podman buildah runc), gcc for the
 * launcher. KNP_IMAGE_KEEP=1 keeps the image (localhost/kube-nft-proxy:e2e) afterwards;
 * KNP_IMAGE_RSS=0 skips the 1k x 10 memory reading.
 * @module
 */
import assert from "node:assert/strict";
import { e2eTest, repoRoot, run } from "../netns.ts";
import { runInnerDriver } from "./fixtures/inner_driver.ts";
import { podman, podmanUnavailable, removeTestContainers } from "./fixtures/container.ts";

const NAME = "image: built with scripts/build-image.sh, run under podman in a node namespace";
const TAG = "localhost/kube-nft-proxy:e2e";

/** Paths (relative to the image root) that must not exist: anything that runs commands. */
const FORBIDDEN = [
  "bin/sh",
  "usr/bin/sh",
  "bin/bash",
  "usr/bin/bash",
  "bin/busybox",
  "usr/bin/busybox",
  "usr/bin/apt",
  "usr/bin/apt-get",
  "usr/bin/dpkg",
  "usr/sbin/dpkg",
  "var/lib/dpkg",
];

/** Where anything in the image may be: the agent, its libraries, glibc, root's passwd entry. */
const ALLOWED = [
  /^usr\/local\/bin\/(kube-nft-proxy|kube-proxy)$/,
  /^usr\/local\/lib\/kube-nft-proxy\/(deno|bundle\/([a-z_]+\/)?[\w-]+\.js)$/,
  /^usr\/lib\/kube-nft-proxy\/lib[a-z_]+\.so\.\d+$/,
  /^usr\/lib\/[a-z0-9_]+-linux-gnu\/(ld-linux[-a-z0-9_]*\.so\.\d|lib[a-z_]+\.so\.\d+)$/,
  /^lib64\/ld-linux[-a-z0-9_]*\.so\.\d$/,
  /^etc\/(passwd|group)$/,
  /^tmp$/,
];

interface Entry {
  path: string;
  info: Deno.FileInfo;
}

/** Every file, link and directory under `root`, with paths relative to it. */
function walk(root: string, rel = ""): Entry[] {
  const out: Entry[] = [];
  for (const e of Deno.readDirSync(`${root}/${rel}`)) {
    const path = rel ? `${rel}/${e.name}` : e.name;
    out.push({ path, info: Deno.lstatSync(`${root}/${path}`) });
    if (e.isDirectory) out.push(...walk(root, path));
  }
  return out;
}

/** Registers the test: like e2eTest, and podman counts as a requirement too. */
function register(fn: () => Promise<void>) {
  const noPodman = podmanUnavailable();
  if (noPodman && Deno.env.get("KNP_REQUIRE_E2E") !== "1") {
    console.error(`SKIP ${NAME}: ${noPodman}`);
    Deno.test({ name: NAME, ignore: true, fn() {} });
    return;
  }
  e2eTest(NAME, async () => {
    if (noPodman) throw new Error(`cannot run: ${noPodman}`);
    await fn();
  });
}

register(async () => {
  const tablesBefore = (await run(["nft", "list", "tables"])).stdout;
  const t0 = Date.now();
  try {
    // The recipe, as a user runs it: it builds the bundle (or the binary) itself.
    const build = await run(["bash", `${repoRoot}/scripts/build-image.sh`, "--tag", TAG], {
      check: false,
    });
    const buildLog = build.stderr.split("\n").filter((l) => l.startsWith("build-image:"));
    assert.equal(build.code, 0, `build-image.sh failed:\n${build.stderr.slice(-4000)}`);
    console.log(
      `${buildLog.filter((l) => !l.startsWith("build-image: lib ")).join("\n")}\n` +
        `(built in ${((Date.now() - t0) / 1000).toFixed(0)} s)`,
    );

    // What is in the image, read from its mounted root.
    const inspect = JSON.parse((await podman(["image", "inspect", TAG])).stdout)[0];
    assert.deepEqual(inspect.Config.Entrypoint, ["/usr/local/bin/kube-nft-proxy"]);
    assert.equal(inspect.Config.User, "0:0");
    assert.ok(
      inspect.Config.Env.includes("KUBE_NFT_PROXY_LIB_DIR=/usr/lib/kube-nft-proxy") &&
        inspect.Config.Env.includes("LD_LIBRARY_PATH=/usr/lib/kube-nft-proxy"),
      JSON.stringify(inspect.Config.Env),
    );
    const binary = inspect.Config.Labels?.["io.kube-nft-proxy.binary"];
    assert.ok(binary === "compiled" || binary === "launcher", `binary label: ${binary}`);
    const root = (await podman(["image", "mount", TAG])).stdout.trim();
    let entries: Entry[];
    try {
      entries = walk(root);
      assert.equal(
        Deno.readLinkSync(`${root}/usr/local/bin/kube-proxy`),
        "kube-nft-proxy",
        "kube-proxy is not a link to kube-nft-proxy",
      );
    } finally {
      await podman(["image", "unmount", TAG], { check: false });
    }
    const paths = new Set(entries.map((e) => e.path));
    const present = FORBIDDEN.filter((p) => paths.has(p));
    assert.deepEqual(present, [], `the image can run commands: ${present.join(", ")}`);
    const stray = entries.filter((e) =>
      !e.info.isDirectory && !ALLOWED.some((re) => re.test(e.path))
    ).map((e) => e.path);
    assert.deepEqual(stray, [], "files the image should not have");
    for (
      const lib of [
        "usr/lib/kube-nft-proxy/libnftables.so.1",
        "usr/lib/kube-nft-proxy/libnetfilter_conntrack.so.3",
        "usr/lib/kube-nft-proxy/libmnl.so.0",
        "lib64/ld-linux-x86-64.so.2",
      ]
    ) assert.ok(paths.has(lib), `${lib} missing`);
    const launcherFiles = ["usr/local/lib/kube-nft-proxy/deno"].filter((p) => paths.has(p));
    assert.equal(launcherFiles.length, binary === "launcher" ? 1 : 0, `binary=${binary}`);
    const mb = (inspect.Size / 1e6).toFixed(0);
    const files = entries.filter((e) => e.info.isFile).length;
    console.log(`image ${TAG}: binary=${binary}, ${mb} MB, ${files} files`);

    await runInnerDriver("im", "image_inner.ts", ["KNP_AGENT_LOG", "KNP_IMAGE_RSS"], {
      KNP_IMAGE_TAG: TAG,
      KNP_IMAGE_RUN_ID: String(Deno.pid),
      KNP_HOST_NS_PID: String(Deno.pid),
    });
  } finally {
    await removeTestContainers();
    if (Deno.env.get("KNP_IMAGE_KEEP") !== "1") {
      await podman(["rmi", "--force", TAG], { check: false });
    }
    console.log(`image test: ${((Date.now() - t0) / 1000).toFixed(0)} s in all`);
  }
  const tablesAfter = (await run(["nft", "list", "tables"])).stdout;
  assert.equal(tablesAfter, tablesBefore, "the host's nftables tables changed");
});
