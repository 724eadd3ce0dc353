import assert from "node:assert/strict";
import { parseArgs, UsageError, versionText } from "../flags.ts";
import { addonArgs, fixturePath, kubeadmArgs } from "../testdata/manifests.ts";
import { configFields } from "./config_file.ts";

const MOUNT = "/var/lib/kube-proxy/config.conf";

/** Reads `file` whenever the agent asks for the ConfigMap mount. */
const mounted = (file: string) => (p: string) => {
  if (p !== MOUNT) throw new Error(`unexpected read of ${p}`);
  return Deno.readTextFileSync(fixturePath(file));
};

const warned = (c: { warnings: string[] }, re: RegExp) =>
  assert.ok(c.warnings.some((w) => re.test(w)), `no warning ${re}: ${c.warnings.join(" | ")}`);

Deno.test("kubeadm's DaemonSet command and ConfigMap (v1alpha1) parse as they are", () => {
  const argv = kubeadmArgs("node-1", MOUNT);
  assert.deepEqual(argv, [`--config=${MOUNT}`, "--hostname-override=node-1"]);
  const c = parseArgs(argv, mounted("./kubeadm-kube-proxy.conf"));
  assert.equal(c.configApiVersion, "kubeproxy.config.k8s.io/v1alpha1");
  assert.equal(c.hostnameOverride, "node-1");
  assert.equal(c.kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf");
  assert.deepEqual(c.clusterCIDRs, ["10.244.0.0/16"]);
  assert.equal(c.syncPeriodMs, 30_000);
  assert.equal(c.minSyncPeriodMs, 1_000);
  assert.equal(c.healthzBindAddress, "0.0.0.0:10256");
  assert.equal(c.metricsBindAddress, "127.0.0.1:10249");
  assert.deepEqual(c.nodeIPOverride, []);
  assert.equal(c.healthzBindCIDRs, undefined);
  warned(c, /"ipvs" does not apply/);
});

Deno.test("kubeadm's DaemonSet with its config carried over to v1alpha2", () => {
  const c = parseArgs(kubeadmArgs("node-1", MOUNT), mounted("./kubeadm-kube-proxy-v1alpha2.conf"));
  assert.equal(c.configApiVersion, "kubeproxy.config.k8s.io/v1alpha2");
  assert.deepEqual(c.clusterCIDRs, ["10.244.0.0/16"]);
  assert.equal(c.kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf");
  assert.equal(c.syncPeriodMs, 30_000);
  assert.equal(c.minSyncPeriodMs, 1_000);
  assert.equal(c.conntrack.maxPerCore, 32768);
  // Empty lists and port 0 are Go zero values: v1alpha2's defaults apply.
  assert.deepEqual(c.healthzBindCIDRs, { cidrs: ["0.0.0.0/0", "::/0"], port: 10256 });
  assert.deepEqual(c.metricsBindCIDRs, { cidrs: ["127.0.0.0/8", "::1/128"], port: 10249 });
  assert.equal(c.healthzBindAddress, "0.0.0.0:10256");
  assert.equal(c.metricsBindAddress, "127.0.0.1:10249");
  assert.deepEqual(c.nodeIPOverride, [], "0.0.0.0 overrides nothing");
  warned(c, /"linux.oomScoreAdj" does not apply/);
});

Deno.test("the kube-up addon DaemonSet's flag list parses; flags without meaning only warn", () => {
  const argv = addonArgs(["--kubeconfig=/var/lib/kube-proxy/kubeconfig"]);
  assert.equal(argv[0], "--cluster-cidr=198.18.64.0/18");
  const c = parseArgs(argv, () => {
    throw new Error("no config file here");
  });
  assert.deepEqual(c.clusterCIDRs, ["198.18.64.0/18"]);
  assert.equal(c.syncPeriodMs, 60_000);
  assert.equal(c.minSyncPeriodMs, 10_000);
  assert.equal(c.verbosity, 2);
  assert.equal(c.detectLocalMode, "NodeCIDR");
  assert.deepEqual(c.featureGates, { AllAlpha: false });
  for (const f of ["oom-score-adj", "ipvs-sync-period", "ipvs-min-sync-period"]) {
    warned(c, new RegExp(`^flag --${f} is accepted for compatibility and has no effect`));
  }
});

Deno.test('upstream\'s v1alpha1 defaults (mode ""): the iptables values are the ones used', () => {
  const text = Deno.readTextFileSync(fixturePath("./kube-proxy-v1alpha1-defaults.yaml"));
  const tuned = text.replace(
    "  minSyncPeriod: 1s\n  syncPeriod: 30s\nipvs",
    "  minSyncPeriod: 7s\n  syncPeriod: 45s\nipvs",
  )
    .replace(
      "nftables:\n  masqueradeAll: false\n  masqueradeBit: 14\n  minSyncPeriod: 1s\n  syncPeriod: 30s\n",
      "",
    );
  const c = parseArgs([`--config=${MOUNT}`], () => tuned);
  assert.equal(
    c.minSyncPeriodMs,
    7_000,
    "iptables.minSyncPeriod, as upstream's default mode reads",
  );
  assert.equal(c.syncPeriodMs, 45_000);
  warned(c, /mode is unset, which upstream runs as "iptables"/);
  const plain = parseArgs([`--config=${MOUNT}`], () => text);
  assert.equal(plain.healthzBindAddress, "0.0.0.0:10256");
  assert.equal(plain.conntrack.tcpCloseWaitTimeoutMs, 3_600_000);
  // With mode: nftables the iptables section does not apply.
  const nft = parseArgs(
    [`--config=${MOUNT}`],
    () => tuned.replace(/^mode: ""$/m, "mode: nftables"),
  );
  assert.equal(nft.minSyncPeriodMs, 1_000);
  warned(nft, /"iptables" does not apply/);
});

Deno.test("upstream's v1alpha2 defaults parse to the same settings as v1alpha1's", () => {
  // The roundtrip fixture sets MultiCIDRServiceAllocator: false, which 1.34+ refuses (GA, locked).
  assert.throws(
    () => parseArgs([`--config=${MOUNT}`], mounted("./kube-proxy-v1alpha2-defaults.yaml")),
    {
      message: "--feature-gates / featureGates: cannot set feature gate " +
        "MultiCIDRServiceAllocator to false, feature is locked to true",
    },
  );
  const unlocked = (p: string) =>
    mounted("./kube-proxy-v1alpha2-defaults.yaml")(p).replace(
      "featureGates:\n  MultiCIDRServiceAllocator: false\n",
      "featureGates: {}\n",
    );
  const c = parseArgs([`--config=${MOUNT}`], unlocked);
  const a = parseArgs([`--config=${MOUNT}`], mounted("./kube-proxy-v1alpha1-defaults.yaml"));
  for (
    const k of ["syncPeriodMs", "minSyncPeriodMs", "masqueradeBit", "detectLocalMode"] as const
  ) {
    assert.equal(c[k], a[k], k);
  }
  assert.deepEqual(c.conntrack, a.conntrack);
  assert.deepEqual(c.healthzBindCIDRs, { cidrs: ["0.0.0.0/0", "::/0"], port: 10256 });
  warned(c, /"configHardFail" does not apply/);
});

Deno.test("v1alpha2: every field it reads, and flags still override the file", () => {
  const yaml = `apiVersion: kubeproxy.config.k8s.io/v1alpha2
kind: KubeProxyConfiguration
hostnameOverride: node-b
nodeIPOverride: ["198.18.0.5", "2001:db8::5"]
healthzBindAddresses: ["198.18.0.0/16"]
healthzBindPort: 12345
metricsBindAddresses: ["0.0.0.0/0"]
metricsBindPort: 23456
mode: nftables
syncPeriod: 1m
minSyncPeriod: 250ms
linux:
  masqueradeAll: true
  conntrack: { maxPerCore: 0, min: 5, tcpBeLiberal: true, udpTimeout: 30s }
nftables: { masqueradeBit: 9 }
detectLocalMode: ClusterCIDR
detectLocal: { clusterCIDRs: ["198.18.1.0/24", "2001:db8:1::/64"] }
nodePortAddresses: ["primary"]
logging: { format: json, verbosity: 3, options: { json: { splitStream: true } } }
`;
  const c = parseArgs([`--config=${MOUNT}`], () => yaml);
  assert.equal(c.hostnameOverride, "node-b");
  assert.deepEqual(c.nodeIPOverride, ["198.18.0.5", "2001:db8::5"]);
  assert.equal(c.bindAddress, "198.18.0.5");
  assert.deepEqual(c.healthzBindCIDRs, { cidrs: ["198.18.0.0/16"], port: 12345 });
  assert.equal(c.healthzBindAddress, "198.18.0.0:12345");
  assert.deepEqual(c.metricsBindCIDRs, { cidrs: ["0.0.0.0/0"], port: 23456 });
  assert.equal(c.syncPeriodMs, 60_000);
  assert.equal(c.minSyncPeriodMs, 250);
  assert.equal(c.masqueradeAll, true);
  assert.equal(c.masqueradeBit, 9);
  assert.deepEqual(c.conntrack.maxPerCore, 0);
  assert.equal(c.conntrack.min, 5);
  assert.equal(c.conntrack.tcpBeLiberal, true);
  assert.equal(c.conntrack.udpTimeoutMs, 30_000);
  assert.deepEqual(c.clusterCIDRs, ["198.18.1.0/24", "2001:db8:1::/64"]);
  assert.deepEqual(c.nodePortAddresses, ["primary"]);
  assert.equal(c.loggingFormat, "json");
  assert.equal(c.logSplitStream, true);
  assert.equal(c.verbosity, 3);
  assert.deepEqual(c.warnings.filter((w) => w.startsWith("config file")), []);

  const f = parseArgs([
    `--config=${MOUNT}`,
    "--healthz-bind-address=127.0.0.1:1",
    "--bind-address=198.18.0.9",
    "--iptables-min-sync-period=2s",
  ], () => yaml);
  assert.equal(f.healthzBindCIDRs, undefined, "the flag replaces the file's list");
  assert.equal(f.healthzBindAddress, "127.0.0.1:1");
  assert.deepEqual(f.nodeIPOverride, ["198.18.0.9"]);
  assert.equal(f.minSyncPeriodMs, 2_000);
  assert.deepEqual(f.metricsBindCIDRs, { cidrs: ["0.0.0.0/0"], port: 23456 });
});

Deno.test("v1alpha2: bad values name the field", () => {
  const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n";
  const bad = (yaml: string, re: RegExp) =>
    assert.throws(() => parseArgs([`--config=${MOUNT}`], () => head + yaml), (e: Error) => {
      assert.ok(e instanceof UsageError);
      assert.match(e.message, re);
      return true;
    });
  bad("healthzBindAddresses: [198.18.0.1]\n", /"healthzBindAddresses": "198.18.0.1" is not a CIDR/);
  bad("healthzBindPort: 70000\n", /"healthzBindPort": 70000 is outside 0..65535/);
  bad("nodeIPOverride: [node-a]\n", /"nodeIPOverride": "node-a" is not an IP address/);
  bad('nodeIPOverride: ["198.18.0.1", "198.18.0.2"]\n', /at most one IP per family/);
  bad("linux: { conntrack: { min: -1 } }\n", /"linux.conntrack.min": -1 is outside/);
  // v1alpha1's string field is not v1alpha2's: a warning, not a silent reading.
  const c = parseArgs([`--config=${MOUNT}`], () => head + "clusterCIDR: 198.18.0.0/16\n");
  warned(c, /unknown field "clusterCIDR"/);
});

Deno.test("the fields each version reads", () => {
  const v2 = configFields("kubeproxy.config.k8s.io/v1alpha2");
  for (
    const f of ["healthzBindAddresses", "metricsBindPort", "linux.conntrack.min", "syncPeriod"]
  ) {
    assert.ok(v2.includes(f), f);
  }
  assert.ok(!v2.includes("nftables.syncPeriod"));
  assert.ok(configFields().includes("nftables.syncPeriod"));
});

Deno.test("pflag spellings: _ for -, -vN, --version=raw, deprecated and klog flags", () => {
  const none = () => {
    throw new Error("no file");
  };
  assert.equal(parseArgs(["--hostname_override=n"], none).hostnameOverride, "n");
  assert.equal(parseArgs(["-v4"], none).verbosity, 4);
  assert.equal(parseArgs(["--version=raw"], none).version, "raw");
  assert.match(versionText(), /^kube-nft-proxy v\d+\.\d+\.\d+ \(kube-proxy v1\.\d+ compatible\)$/);
  assert.match(versionText(true), /^version\.Info\{Major:"\d+", Minor:"\d+", GitVersion:"v/);
  const v = parseArgs(["--version=v1.30.0"], none);
  assert.equal(v.version, false, "--version=vX.Y.Z does not print");
  warned(v, /--version=v1.30.0 sets the reported version upstream; ignored/);

  const p = parseArgs(["--healthz-port=12345", "--metrics-port=0"], none);
  assert.equal(p.healthzBindAddress, "0.0.0.0:12345");
  assert.equal(p.metricsBindAddress, "", "port 0 disables the server");
  warned(p, /--healthz-port has been deprecated/);
  const q = parseArgs(["--healthz-bind-address=198.18.0.1:1", "--healthz-port=2"], none);
  assert.equal(q.healthzBindAddress, "198.18.0.1:1", "an address with a port keeps it");
  const withConf = parseArgs(
    [`--config=${MOUNT}`, "--healthz-port=2"],
    () =>
      "kind: KubeProxyConfiguration\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nmode: nftables\n",
  );
  assert.equal(withConf.healthzBindAddress, "0.0.0.0:10256", "ignored with --config, as upstream");

  const split = parseArgs(["--log-text-split-stream"], none);
  assert.equal(split.logSplitStream, true);
  assert.equal(parseArgs(["--log-json-split-stream"], none).logSplitStream, false, "text format");
  const file = parseArgs(
    ["--logtostderr=false", "--log_file=/tmp/kp.log", "--alsologtostderr"],
    none,
  );
  assert.equal(file.logFile, "/tmp/kp.log");
  assert.equal(file.alsoLogToStderr, true);
  assert.equal(parseArgs(["--log-file=/tmp/kp.log"], none).logFile, undefined, "logtostderr wins");
  warned(parseArgs(["--logtostderr=false"], none), /without --log-file/);
  warned(parseArgs(["--log_dir=/var/log", "--vmodule=a=1"], none), /--log-dir is accepted/);
});

Deno.test("docs/flags.md lists every ignored upstream flag and every extension", async () => {
  const { FLAGS, IGNORED_FLAGS } = await import("../flags.ts");
  const doc = Deno.readTextFileSync(new URL("../../docs/flags.md", import.meta.url));
  for (const name of IGNORED_FLAGS.keys()) assert.ok(doc.includes(`\`--${name}\``), name);
  const ours = doc.slice(doc.indexOf("Our extensions"), doc.indexOf("Accepted with a one-line"));
  for (const f of FLAGS.filter((f) => f.ours)) assert.ok(ours.includes(`\`--${f.name}\``), f.name);
});

/**
 * Every flag kube-proxy v1.34 registers on Linux, with a value of the right kind: options.go's
 * AddFlags, component-base's logging flags, klog's (still registered through the Go flag set,
 * underscore-spelled) and verflag's --version.
 */
const UPSTREAM_FLAGS: Readonly<Record<string, string>> = {
  "config": "", // read below
  "write-config-to": "/dev/null",
  "cleanup": "false",
  "feature-gates": "AllAlpha=false",
  "kubeconfig": "/k",
  "master": "https://198.18.0.9",
  "kube-api-content-type": "application/json",
  "kube-api-burst": "10",
  "kube-api-qps": "5",
  "hostname-override": "n",
  "bind-address": "0.0.0.0",
  "healthz-bind-address": "0.0.0.0:10256",
  "metrics-bind-address": "127.0.0.1:10249",
  "bind-address-hard-fail": "true",
  "profiling": "false",
  "show-hidden-metrics-for-version": "1.33",
  "init-only": "false",
  "proxy-mode": "nftables",
  "iptables-masquerade-bit": "14",
  "masquerade-all": "false",
  "iptables-localhost-nodeports": "true",
  "iptables-sync-period": "30s",
  "iptables-min-sync-period": "1s",
  "ipvs-sync-period": "30s",
  "ipvs-min-sync-period": "1s",
  "ipvs-scheduler": "rr",
  "ipvs-exclude-cidrs": "198.18.0.0/24",
  "ipvs-strict-arp": "false",
  "ipvs-tcp-timeout": "0s",
  "ipvs-tcpfin-timeout": "0s",
  "ipvs-udp-timeout": "0s",
  "detect-local-mode": "ClusterCIDR",
  "pod-bridge-interface": "cbr0",
  "pod-interface-name-prefix": "veth",
  "cluster-cidr": "198.18.64.0/18",
  "nodeport-addresses": "primary",
  "oom-score-adj": "-999",
  "conntrack-max-per-core": "32768",
  "conntrack-min": "131072",
  "conntrack-tcp-timeout-established": "24h",
  "conntrack-tcp-timeout-close-wait": "1h",
  "conntrack-tcp-be-liberal": "false",
  "conntrack-udp-timeout": "0s",
  "conntrack-udp-timeout-stream": "0s",
  "config-sync-period": "15m",
  "healthz-port": "10256",
  "metrics-port": "10249",
  "logging-format": "text",
  "log-flush-frequency": "5s",
  "v": "2",
  "vmodule": "proxier=4",
  "log-text-split-stream": "false",
  "log-text-info-buffer-size": "0",
  "add_dir_header": "false",
  "alsologtostderr": "false",
  "log_backtrace_at": ":0",
  "log_dir": "",
  "log_file": "/tmp/kube-proxy.log",
  "log_file_max_size": "1800",
  "logtostderr": "true",
  "one_output": "false",
  "skip_headers": "false",
  "skip_log_headers": "false",
  "stderrthreshold": "2",
  "version": "false",
};

Deno.test("every flag kube-proxy v1.34 registers on Linux is accepted", () => {
  const upstream = UPSTREAM_FLAGS;
  const argv = Object.entries(upstream).filter(([k]) => k !== "config").map(([k, v]) =>
    `--${k}=${v}`
  );
  const c = parseArgs(argv, () => {
    throw new Error("no file");
  });
  assert.equal(c.syncPeriodMs, 30_000);
  assert.equal(c.verbosity, 2);
  for (const [k, v] of Object.entries(upstream)) {
    if (k === "config") continue;
    // And each one alone, in the separate-value form where it takes one.
    const bool = v === "true" || v === "false";
    parseArgs(bool ? [`--${k}`] : [`--${k}`, v], () => "");
  }
});
