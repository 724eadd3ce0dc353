import assert from "node:assert/strict";
import {
  CONFIG_FIELDS,
  FLAGS,
  normalizeHostPort,
  parseArgs,
  splitHostPort,
  usage,
  UsageError,
} from "./flags.ts";

const noFile = (p: string): string => {
  throw new Error(`no such file ${p}`);
};
const parse = (...argv: string[]) => parseArgs(argv, noFile);
const fileOf = (text: string) => (p: string) => {
  if (p !== "/etc/kp.yaml") throw new Error(`unexpected path ${p}`);
  return text;
};
const HEADER = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";
const withFile = (yaml: string, ...argv: string[]) =>
  parseArgs(["--config", "/etc/kp.yaml", ...argv], fileOf(HEADER + yaml));

function usageErr(fn: () => unknown, re: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof UsageError, `expected UsageError, got ${e}`);
    assert.match(e.message, re);
    return true;
  });
}

Deno.test("defaults match kube-proxy", () => {
  const c = parse();
  assert.equal(c.bindAddress, "0.0.0.0");
  assert.deepEqual(c.clusterCIDRs, []);
  assert.equal(c.detectLocalMode, "ClusterCIDR");
  assert.deepEqual(c.nodePortAddresses, []);
  assert.equal(c.masqueradeAll, false);
  assert.equal(c.masqueradeBit, 14);
  assert.equal(c.syncPeriodMs, 30_000);
  assert.equal(c.minSyncPeriodMs, 1_000);
  assert.equal(c.fullSyncPeriodMs, 3_600_000);
  assert.equal(c.conntrackReconcilerPeriodMs, 30_000);
  assert.equal(c.healthzBindAddress, "0.0.0.0:10256");
  assert.equal(c.metricsBindAddress, "127.0.0.1:10249");
  assert.deepEqual(c.conntrack, {
    maxPerCore: 32768,
    min: 131072,
    tcpEstablishedTimeoutMs: 86_400_000,
    tcpCloseWaitTimeoutMs: 3_600_000,
    tcpBeLiberal: false,
    udpTimeoutMs: 0,
    udpStreamTimeoutMs: 0,
  });
  assert.equal(c.cleanup, false);
  assert.equal(c.verbosity, 0);
  assert.equal(c.loggingFormat, "text");
  assert.equal(c.dryRun, false);
  assert.equal(c.version, false);
  assert.equal(c.help, false);
  assert.equal(c.mode, "nftables");
  assert.equal(c.kubeconfig, undefined);
  assert.equal(c.master, undefined);
  assert.equal(c.libDir, undefined);
  // ClusterCIDR with no CIDR detects nothing, as upstream; we say so.
  assert.ok(c.warnings.some((w) => /no --cluster-cidr/.test(w)));
});

Deno.test("every flag in both --flag=value and --flag value forms", () => {
  const cases: Array<[string, string, (c: ReturnType<typeof parse>) => unknown, unknown]> = [
    ["kubeconfig", "/k.conf", (c) => c.kubeconfig, "/k.conf"],
    ["master", "https://198.18.0.1:6443/", (c) => c.master, "https://198.18.0.1:6443"],
    ["hostname-override", "node-a", (c) => c.hostnameOverride, "node-a"],
    ["bind-address", "198.18.0.5", (c) => c.bindAddress, "198.18.0.5"],
    ["cluster-cidr", "198.18.0.0/16,2001:db8::/48", (c) => c.clusterCIDRs, [
      "198.18.0.0/16",
      "2001:db8::/48",
    ]],
    ["nodeport-addresses", "198.18.0.0/24, 2001:db8::/64", (c) => c.nodePortAddresses, [
      "198.18.0.0/24",
      "2001:db8::/64",
    ]],
    ["nodeport-addresses", "primary", (c) => c.nodePortAddresses, ["primary"]],
    ["nodeport-addresses", "primary,localhost", (c) => c.nodePortAddresses, [
      "primary",
      "localhost",
    ]],
    ["nodeport-addresses", "198.18.0.0/24,primary", (c) => c.nodePortAddresses, [
      "198.18.0.0/24",
      "primary",
    ]],
    ["nodeport-addresses", "all", (c) => c.nodePortAddresses, ["all"]],
    ["iptables-masquerade-bit", "3", (c) => c.masqueradeBit, 3],
    ["masquerade-bit", "31", (c) => c.masqueradeBit, 31],
    ["sync-period", "1h30m", (c) => c.syncPeriodMs, 5_400_000],
    ["min-sync-period", "500ms", (c) => c.minSyncPeriodMs, 500],
    ["iptables-sync-period", "45s", (c) => c.syncPeriodMs, 45_000],
    ["iptables-min-sync-period", "250ms", (c) => c.minSyncPeriodMs, 250],
    ["full-sync-period", "2h", (c) => c.fullSyncPeriodMs, 7_200_000],
    ["conntrack-reconciler-period", "5m", (c) => c.conntrackReconcilerPeriodMs, 300_000],
    ["healthz-bind-address", "198.18.0.1:1234", (c) => c.healthzBindAddress, "198.18.0.1:1234"],
    ["healthz-bind-address", "198.18.0.1", (c) => c.healthzBindAddress, "198.18.0.1:10256"],
    ["metrics-bind-address", "[2001:db8::1]:9", (c) => c.metricsBindAddress, "[2001:db8::1]:9"],
    ["metrics-bind-address", "2001:db8::1", (c) => c.metricsBindAddress, "[2001:db8::1]:10249"],
    ["conntrack-max-per-core", "0", (c) => c.conntrack.maxPerCore, 0],
    ["conntrack-min", "1000", (c) => c.conntrack.min, 1000],
    ["conntrack-tcp-timeout-established", "2h", (c) => c.conntrack.tcpEstablishedTimeoutMs, 7.2e6],
    ["conntrack-tcp-timeout-close-wait", "30s", (c) => c.conntrack.tcpCloseWaitTimeoutMs, 30_000],
    ["conntrack-udp-timeout", "30s", (c) => c.conntrack.udpTimeoutMs, 30_000],
    ["conntrack-udp-timeout-stream", "2m", (c) => c.conntrack.udpStreamTimeoutMs, 120_000],
    ["v", "4", (c) => c.verbosity, 4],
    ["logging-format", "json", (c) => c.loggingFormat, "json"],
    ["lib-dir", "/opt/lib", (c) => c.libDir, "/opt/lib"],
    ["proxy-mode", "nftables", (c) => c.mode, "nftables"],
  ];
  for (const [name, value, get, want] of cases) {
    assert.deepEqual(get(parse(`--${name}=${value}`)), want, `--${name}=${value}`);
    assert.deepEqual(get(parse(`--${name}`, value)), want, `--${name} ${value}`);
  }
});

Deno.test("boolean flags: bare, =true and =false", () => {
  const bools: Array<[string, (c: ReturnType<typeof parse>) => boolean]> = [
    ["masquerade-all", (c) => c.masqueradeAll],
    ["conntrack-tcp-be-liberal", (c) => c.conntrack.tcpBeLiberal],
    ["cleanup", (c) => c.cleanup],
    ["dry-run", (c) => c.dryRun],
    ["version", (c) => c.version === true],
    ["help", (c) => c.help],
  ];
  for (const [name, get] of bools) {
    assert.equal(get(parse(`--${name}`)), true, name);
    assert.equal(get(parse(`--${name}=true`)), true, name);
    assert.equal(get(parse(`--${name}=false`)), false, name);
  }
  // A bare boolean does not swallow the next argument.
  const c = parse("--masquerade-all", "--v=2");
  assert.equal(c.masqueradeAll, true);
  assert.equal(c.verbosity, 2);
  usageErr(() => parse("--cleanup=yes"), /--cleanup: "yes" is not a boolean; expected --cleanup/);
  assert.equal(parse("-h").help, true);
});

Deno.test("-v=N, -v N, --v=N and --v N", () => {
  assert.equal(parse("-v=3").verbosity, 3);
  assert.equal(parse("-v", "5").verbosity, 5);
  assert.equal(parse("--v=6").verbosity, 6);
  assert.equal(parse("--v", "7").verbosity, 7);
  usageErr(() => parse("-v=x"), /--v: "x" is not an integer; expected an integer 0\.\.10/);
});

Deno.test("detect-local-mode values and their required companions", () => {
  assert.equal(parse("--detect-local-mode=NodeCIDR").detectLocalMode, "NodeCIDR");
  const b = parse("--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0");
  assert.equal(b.podBridgeInterface, "cbr0");
  const p = parse("--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix=veth");
  assert.equal(p.podInterfaceNamePrefix, "veth");
  usageErr(() => parse("--detect-local-mode=BridgeInterface"), /needs --pod-bridge-interface/);
  usageErr(
    () => parse("--detect-local-mode=InterfaceNamePrefix"),
    /needs --pod-interface-name-prefix/,
  );
  usageErr(
    () => parse("--detect-local-mode=Bogus"),
    /--detect-local-mode: "Bogus" is not one of ClusterCIDR, NodeCIDR.*expected ClusterCIDR\|/,
  );
  const c = parse("--cluster-cidr=198.18.0.0/16");
  assert.equal(c.warnings.length, 0);
});

Deno.test("invalid values name the flag and the accepted form", () => {
  usageErr(() => parse("--bogus=1"), /unknown flag --bogus/);
  usageErr(() => parse("stray"), /unexpected argument "stray"/);
  usageErr(() => parse("--sync-period"), /--sync-period needs a value/);
  usageErr(() => parse("--sync-period=30"), /--sync-period: invalid duration "30".*Go syntax/);
  usageErr(() => parse("--sync-period=0s"), /--sync-period: .*greater than 0/);
  usageErr(() => parse("--min-sync-period=-1s"), /--min-sync-period: .*negative/);
  usageErr(() => parse("--min-sync-period=1m", "--sync-period=30s"), /must not exceed/);
  usageErr(() => parse("--iptables-masquerade-bit=32"), /outside 0\.\.31; expected an integer 0/);
  usageErr(() => parse("--masquerade-bit=1.5"), /not an integer/);
  usageErr(() => parse("--cluster-cidr=198.18.0.0"), /--cluster-cidr: "198.18.0.0" is not a CIDR/);
  usageErr(
    () => parse("--cluster-cidr=198.18.0.0/16,198.19.0.0/16"),
    /at most one CIDR per IP family/,
  );
  usageErr(
    () => parse("--nodeport-addresses=primary,all"),
    /--nodeport-addresses: NodePortAddresses\[1\]: Invalid value: "all": 'all' can't be combined/,
  );
  usageErr(
    () => parse("--nodeport-addresses=eth0"),
    /"eth0": must be a valid CIDR or one of 'primary', 'localhost', 'all'/,
  );
  usageErr(() => parse("--healthz-bind-address=host:1"), /"host" is not an IP address/);
  usageErr(() => parse("--metrics-bind-address=198.18.0.1:99999"), /port "99999"/);
  usageErr(() => parse("--bind-address=nope"), /--bind-address: "nope" is not an IP address/);
  usageErr(() => parse("--master=ftp://x"), /--master: .*http:\/\/ or https:\/\//);
  usageErr(() => parse("--master=::"), /--master: "::" is not a URL/);
  usageErr(() => parse("--logging-format=xml"), /--logging-format: "xml" is not "text" or "json"/);
  usageErr(() => parse("--proxy-mode=iptables"), /only the "nftables" mode/);
  usageErr(() => parse("--proxy-mode=ipvs"), /"ipvs" is not supported/);
  usageErr(() => parse("--conntrack-min=-1"), /--conntrack-min: -1 is outside/);
  usageErr(() => parse("--hostname-override="), /--hostname-override: the value must not be empty/);
  usageErr(() => parse("--config="), /--config needs a file path/);
  usageErr(() => parse("--config=/missing"), /--config: cannot read \/missing/);
});

Deno.test("empty healthz/metrics address disables the server", () => {
  const c = parse("--healthz-bind-address=", "--metrics-bind-address=");
  assert.equal(c.healthzBindAddress, "");
  assert.equal(c.metricsBindAddress, "");
});

Deno.test("IPv6 bind address switches the server defaults to IPv6", () => {
  const c = parse("--bind-address=2001:db8::5");
  assert.equal(c.healthzBindAddress, "[::]:10256");
  assert.equal(c.metricsBindAddress, "[::1]:10249");
});

Deno.test("config file: every field is read", () => {
  const c = withFile(`
bindAddress: 198.18.0.9
healthzBindAddress: 198.18.0.9:10000
metricsBindAddress: 0.0.0.0:10001
clusterCIDR: 198.18.0.0/16,2001:db8:1::/48
hostnameOverride: node-b
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
mode: nftables
nodePortAddresses: ["198.18.0.0/24"]
detectLocalMode: BridgeInterface
detectLocal:
  bridgeInterface: cbr0
  interfaceNamePrefix: veth
nftables:
  masqueradeAll: true
  masqueradeBit: 5
  syncPeriod: 45s
  minSyncPeriod: 2s
conntrack:
  maxPerCore: 100
  min: 200
  tcpEstablishedTimeout: 12h
  tcpCloseWaitTimeout: 30m
  tcpBeLiberal: true
  udpTimeout: 40s
  udpStreamTimeout: 3m
logging:
  format: json
  verbosity: 3
`);
  assert.equal(c.configFile, "/etc/kp.yaml");
  assert.equal(c.bindAddress, "198.18.0.9");
  assert.equal(c.healthzBindAddress, "198.18.0.9:10000");
  assert.equal(c.metricsBindAddress, "0.0.0.0:10001");
  assert.deepEqual(c.clusterCIDRs, ["198.18.0.0/16", "2001:db8:1::/48"]);
  assert.equal(c.hostnameOverride, "node-b");
  assert.equal(c.kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf");
  assert.deepEqual(c.nodePortAddresses, ["198.18.0.0/24"]);
  assert.equal(c.detectLocalMode, "BridgeInterface");
  assert.equal(c.podBridgeInterface, "cbr0");
  assert.equal(c.podInterfaceNamePrefix, "veth");
  assert.equal(c.masqueradeAll, true);
  assert.equal(c.masqueradeBit, 5);
  assert.equal(c.syncPeriodMs, 45_000);
  assert.equal(c.minSyncPeriodMs, 2_000);
  assert.deepEqual(c.conntrack, {
    maxPerCore: 100,
    min: 200,
    tcpEstablishedTimeoutMs: 43_200_000,
    tcpCloseWaitTimeoutMs: 1_800_000,
    tcpBeLiberal: true,
    udpTimeoutMs: 40_000,
    udpStreamTimeoutMs: 180_000,
  });
  assert.equal(c.loggingFormat, "json");
  assert.equal(c.verbosity, 3);
  assert.deepEqual(c.warnings, []);
});

Deno.test("config file: flags override the file", () => {
  const c = withFile(
    "nftables:\n  syncPeriod: 45s\n  masqueradeAll: true\nlogging:\n  verbosity: 3\n",
    "--sync-period=10s",
    "--masquerade-all=false",
    "-v=1",
  );
  assert.equal(c.syncPeriodMs, 10_000);
  assert.equal(c.masqueradeAll, false);
  assert.equal(c.verbosity, 1);
});

Deno.test("config file: top-level sync periods, nftables.* wins", () => {
  assert.equal(withFile("syncPeriod: 20s\nminSyncPeriod: 3s\n").syncPeriodMs, 20_000);
  const c = withFile("nftables:\n  syncPeriod: 40s\nsyncPeriod: 20s\n");
  assert.equal(c.syncPeriodMs, 40_000);
});

Deno.test("config file: nulls leave defaults, unknown and foreign fields warn", () => {
  const c = withFile(`
mode: nftables
conntrack:
  maxPerCore: null
  min: null
nodePortAddresses: null
iptables:
  masqueradeAll: true
featureGates: {}
mystery: 1
nftables:
  surprise: true
`);
  assert.equal(c.conntrack.maxPerCore, 32768);
  assert.equal(c.conntrack.min, 131072);
  assert.ok(c.warnings.some((w) => w.includes(`"iptables" does not apply`)), c.warnings.join());
  assert.deepEqual(c.featureGates, {}, "featureGates is read now");
  assert.ok(c.warnings.some((w) => w.includes(`unknown field "mystery"`)));
  assert.ok(c.warnings.some((w) => w.includes(`unknown field "nftables.surprise"`)));
});

Deno.test("config file: wrong types name the field", () => {
  usageErr(
    () => withFile("nftables:\n  masqueradeBit: five\n"),
    /"nftables.masqueradeBit".*integer/,
  );
  usageErr(() => withFile("nftables:\n  masqueradeBit: 40\n"), /"nftables.masqueradeBit": 40 is/);
  usageErr(
    () => withFile("nftables:\n  syncPeriod: 30\n"),
    /"nftables.syncPeriod": expected a dur/,
  );
  usageErr(() => withFile("nftables:\n  syncPeriod: 30x\n"), /"nftables.syncPeriod": invalid dur/);
  usageErr(() => withFile("nftables:\n  masqueradeAll: yes please\n"), /masqueradeAll.*true or/);
  usageErr(() => withFile("conntrack: 5\n"), /"conntrack": expected a map, got number/);
  usageErr(() => withFile("nodePortAddresses: 198.18.0.0/24\n"), /nodePortAddresses.*list/);
  usageErr(
    () => withFile("nodePortAddresses: [bad]\n"),
    /"nodePortAddresses": NodePortAddresses\[0\]: Invalid value: "bad": must be a valid CIDR/,
  );
  usageErr(() => withFile("nodePortAddresses: [all, localhost]\n"), /'all' can't be combined/);
  usageErr(() => withFile("clusterCIDR: [a]\n"), /"clusterCIDR": expected a string, got list/);
  usageErr(() => withFile("mode: ipvs\n"), /"mode": "ipvs" is not supported/);
  usageErr(() => withFile("detectLocalMode: X\n"), /"detectLocalMode": "X" is not one of/);
  usageErr(() => withFile("logging:\n  format: xml\n"), /"logging.format"/);
  usageErr(() => withFile("logging:\n  verbosity: 11\n"), /"logging.verbosity": 11 is outside/);
  usageErr(() => withFile("bindAddress: 1.2.3\n"), /"bindAddress": "1.2.3" is not an IP/);
  usageErr(() => withFile("healthzBindAddress: x:1\n"), /"healthzBindAddress"/);
  usageErr(() => withFile("conntrack:\n  udpTimeout: -5s\n"), /"conntrack.udpTimeout".*negative/);
  usageErr(() => withFile("hostnameOverride: 5\n"), /"hostnameOverride": expected a string/);
  usageErr(() => withFile("clientConnection:\n  kubeconfig: 1\n"), /clientConnection.kubeconfig/);
  usageErr(() => withFile("conntrack:\n  tcpBeLiberal: 1\n"), /"conntrack.tcpBeLiberal"/);
});

Deno.test("config file: header and YAML errors", () => {
  const read = (text: string) => () => parseArgs(["--config=/etc/kp.yaml"], fileOf(text));
  usageErr(read("kind: KubeProxyConfiguration\napiVersion: v1\n"), /apiVersion must be/);
  usageErr(read(HEADER.replace("KubeProxyConfiguration", "Pod")), /kind must be "KubeProxyConf/);
  usageErr(read("- a\n- b\n"), /expected a KubeProxyConfiguration map/);
  usageErr(read("a: [\n"), /not valid YAML/);
});

Deno.test("--help and --version skip reading the config file", () => {
  const c = parseArgs(["--config=/nope", "--help"], noFile);
  assert.equal(c.help, true);
  assert.equal(parseArgs(["--config=/nope", "--version"], noFile).version, true);
  const text = usage();
  for (const f of FLAGS) assert.ok(text.includes(`--${f.name}`), f.name);
});

Deno.test("host:port helpers", () => {
  assert.equal(normalizeHostPort("[::]", 5), "[::]:5");
  assert.throws(() => normalizeHostPort("198.18.0.256:5", 5), /not an IP address/);
  assert.deepEqual(splitHostPort("[2001:db8::1]:80"), { hostname: "2001:db8::1", port: 80 });
  assert.deepEqual(splitHostPort("198.18.0.1:80"), { hostname: "198.18.0.1", port: 80 });
});

Deno.test("CONFIG_FIELDS lists every leaf field we read", () => {
  for (const f of ["clientConnection.kubeconfig", "nftables.syncPeriod", "logging.verbosity"]) {
    assert.ok(CONFIG_FIELDS.includes(f), f);
  }
  assert.ok(!CONFIG_FIELDS.includes("nftables"));
});

Deno.test("the README or docs/flags.md documents every flag and config field", () => {
  const doc = ["../README.md", "../docs/flags.md"]
    .map((p) => Deno.readTextFileSync(new URL(p, import.meta.url))).join("\n");
  for (const f of FLAGS) assert.ok(doc.includes("`--" + f.name + "`"), `--${f.name} undocumented`);
  for (const field of CONFIG_FIELDS) {
    const leaf = field.split(".").at(-1)!;
    assert.ok(new RegExp(`^\\s*${leaf}:`, "m").test(doc), `${field} undocumented`);
  }
});

Deno.test("kubeadm's own config.conf loads: Go zero values mean the defaults", () => {
  const path = new URL("./testdata/kubeadm-kube-proxy.conf", import.meta.url).pathname;
  const c = parseArgs(["--config", path]);
  assert.equal(c.detectLocalMode, "ClusterCIDR");
  assert.deepEqual(c.clusterCIDRs, ["10.244.0.0/16"]);
  assert.equal(c.syncPeriodMs, 30_000);
  assert.equal(c.minSyncPeriodMs, 1_000);
  assert.equal(c.healthzBindAddress, "0.0.0.0:10256");
  assert.equal(c.metricsBindAddress, "127.0.0.1:10249");
  assert.equal(c.kubeconfig, "/var/lib/kube-proxy/kubeconfig.conf");
  assert.equal(c.conntrack.maxPerCore, 32768, "null conntrack values take the defaults");
  assert.ok(c.warnings.some((w) => w.includes('"ipvs')), "ipvs section is reported as ignored");
});

Deno.test("a bare -- (as `deno task start -- ...` passes it) is ignored", () => {
  const c = parseArgs(["--", "--masquerade-all", "--v=3"]);
  assert.equal(c.masqueradeAll, true);
  assert.equal(c.verbosity, 3);
});

Deno.test("upstream's own command lines start the agent: unknown-here flags only warn", () => {
  // The GCE/addon kube-proxy manifest's flags (kube-up's configure-helper), and kubeadm's.
  const addon = [
    "--master=https://198.18.0.9",
    "--kubeconfig=/var/lib/kube-proxy/kubeconfig",
    "--cluster-cidr=198.18.64.0/18",
    "--resource-container=",
    "--oom-score-adj=-998",
    "--v=2",
    "--feature-gates=AllAlpha=false",
    "--iptables-sync-period=1m",
    "--iptables-min-sync-period=10s",
    "--ipvs-sync-period=1m",
    "--ipvs-min-sync-period=10s",
  ];
  const c = parseArgs(addon);
  assert.equal(c.syncPeriodMs, 60_000);
  assert.equal(c.minSyncPeriodMs, 10_000);
  assert.equal(c.verbosity, 2);
  assert.deepEqual(c.featureGates, { AllAlpha: false });
  for (const f of ["resource-container", "oom-score-adj", "ipvs-sync-period"]) {
    assert.ok(
      c.warnings.some((w) => w.startsWith(`flag --${f} is accepted for compatibility`)),
      `no warning for --${f}: ${c.warnings.join("; ")}`,
    );
  }
  // Space-separated values are consumed too, and bools take none.
  const d = parseArgs(["--kube-api-qps", "50", "--profiling", "--v", "3"]);
  assert.equal(d.verbosity, 3);
  assert.equal(d.warnings.filter((w) => w.includes("accepted for compatibility")).length, 2);
  const kubeadm = parseArgs(["--hostname-override=node-1"]);
  assert.equal(kubeadm.hostnameOverride, "node-1");
});

Deno.test("a misspelled flag is still an error, with a hint", () => {
  assert.throws(
    () => parseArgs(["--hostname-overide=x"]),
    /unknown flag --hostname-overide; did you mean --hostname-override\?/,
  );
  assert.throws(() => parseArgs(["--masquerade-al"]), /did you mean --masquerade-all\?/);
  assert.throws(
    () => parseArgs(["--completely-unrelated=1"]),
    (e: Error) => !/did you mean/.test(e.message),
  );
});

Deno.test("IPv4 leading zeros are read as decimal, as upstream's ParseIPSloppy and ParseCIDRSloppy", () => {
  // kube-proxy validates --bind-address and the healthz/metrics addresses with
  // k8s.io/utils/net ParseIPSloppy, and --cluster-cidr / --nodeport-addresses with
  // ParseCIDRSloppy: "010" is 10. The parsed address is what it uses, so ours is canonical.
  assert.equal(parse("--bind-address=010.0.0.5").bindAddress, "10.0.0.5");
  assert.equal(parse("--healthz-bind-address=127.0.0.01:99").healthzBindAddress, "127.0.0.1:99");
  assert.deepEqual(parse("--cluster-cidr=010.0.0.0/8").clusterCIDRs, ["10.0.0.0/8"]);
  assert.deepEqual(parse("--nodeport-addresses=198.018.0.0/16").nodePortAddresses, [
    "198.18.0.0/16",
  ]);
});
