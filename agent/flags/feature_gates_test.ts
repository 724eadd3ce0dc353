import assert from "node:assert/strict";
import { parseArgs, UsageError } from "../flags.ts";
import {
  aggregate,
  gateEnabled,
  parseGatePairs,
  proxyGates,
  resolveGates,
} from "./feature_gates.ts";
import { KNOWN_GATES, PROXY_GATES } from "./gate_table.ts";

const fails = (argv: string[], message: string, file?: string) =>
  assert.throws(() => parseArgs(argv, () => file ?? ""), (e) => {
    assert.ok(e instanceof UsageError, String(e));
    assert.equal(e.message, message);
    return true;
  });

Deno.test("--feature-gates pairs: MapStringBool's syntax and error texts", () => {
  const m: Record<string, boolean> = {};
  parseGatePairs("A=true, B = false,,C=1,D=F", m);
  assert.deepEqual(m, { A: true, B: false, C: true, D: false });
  assert.throws(() => parseGatePairs("A", {}), { message: "malformed pair, expect string=bool" });
  assert.throws(() => parseGatePairs("A=yes", {}), {
    message: `invalid value of A: yes, err: strconv.ParseBool: parsing "yes": invalid syntax`,
  });
  fails(
    ["--feature-gates=AllowServiceExternalIPs"],
    `invalid argument "AllowServiceExternalIPs" for "--feature-gates" flag: ` +
      "malformed pair, expect string=bool",
  );
  fails(
    ["--feature-gates", "AllAlpha=maybe"],
    `invalid argument "AllAlpha=maybe" for "--feature-gates" flag: invalid value of AllAlpha: ` +
      `maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax`,
  );
});

Deno.test("SetFromMap's errors: unknown gates, locked gates, several at once", () => {
  fails(
    ["--feature-gates=NoSuchGate=true"],
    "--feature-gates / featureGates: " +
      "unrecognized feature gate: NoSuchGate",
  );
  fails(["--feature-gates==true"], "--feature-gates / featureGates: unrecognized feature gate: ");
  fails(
    ["--feature-gates=MultiCIDRServiceAllocator=false"],
    "--feature-gates / featureGates: cannot set feature gate MultiCIDRServiceAllocator to false, " +
      "feature is locked to true",
  );
  const r = resolveGates({ NFTablesProxyMode: false, ComponentSLIs: false });
  assert.deepEqual(r.errors, [
    "cannot set feature gate NFTablesProxyMode to false, feature is locked to true",
    "cannot set feature gate ComponentSLIs to false, feature is locked to true",
  ]);
  assert.equal(
    aggregate(r.errors),
    "[cannot set feature gate NFTablesProxyMode to false, feature is locked to true, " +
      "cannot set feature gate ComponentSLIs to false, feature is locked to true]",
  );
  // An unknown gate stops at once, keeping what came before (upstream's early return).
  assert.deepEqual(resolveGates({ NFTablesProxyMode: false, Nope: true, Other: true }).errors, [
    "cannot set feature gate NFTablesProxyMode to false, feature is locked to true",
    "unrecognized feature gate: Nope",
  ]);
  // A locked gate set to its own value is fine, and warns as GA.
  assert.deepEqual(resolveGates({ NFTablesProxyMode: true }).warnings, [
    "Setting GA feature gate NFTablesProxyMode=true. It will be removed in a future release.",
  ]);
});

Deno.test("deprecated gates warn with upstream's text", () => {
  const c = parseArgs(["--feature-gates=AllowServiceExternalIPs=false"]);
  assert.ok(c.warnings.includes(
    "Setting deprecated feature gate AllowServiceExternalIPs=false. It will be removed in a " +
      "future release.",
  ));
  assert.equal(c.gates.allowServiceExternalIPs, false);
  assert.deepEqual(c.featureGates, { AllowServiceExternalIPs: false });
});

Deno.test("AllAlpha / AllBeta set the gates of their stage that are not set explicitly", () => {
  const beta = resolveGates({ ComponentFlagz: true, AllBeta: false });
  assert.equal(beta.enabled.ComponentFlagz, true, "explicit wins, whatever the order");
  assert.equal(beta.enabled.ComponentStatusz, false);
  assert.equal(beta.enabled.KubeProxyNFTablesLocalhostNodePorts, false);
  assert.equal(beta.enabled.AllowServiceExternalIPs, undefined, "deprecated: not beta");
  assert.equal(beta.enabled.AllBeta, false);
  const alpha = resolveGates({ AllAlpha: true, LoggingAlphaOptions: false });
  assert.equal(alpha.enabled.LoggingAlphaOptions, false);
  assert.equal(alpha.enabled.AllBeta, undefined, "AllAlpha does not set AllBeta");
  for (const [name, spec] of KNOWN_GATES) {
    if (spec.stage === "Alpha" && name !== "AllAlpha" && name !== "LoggingAlphaOptions") {
      assert.equal(alpha.enabled[name], true, name);
    }
  }
  const c = parseArgs(["--feature-gates=AllBeta=false,ComponentFlagz=true"]);
  assert.deepEqual(c.gates, {
    allowServiceExternalIPs: true,
    localhostNodePorts: false,
    componentStatusz: false,
    componentFlagz: true,
  });
});

Deno.test("defaults: the 1.38 values of the gates the agent reads", () => {
  assert.deepEqual(proxyGates({}), {
    allowServiceExternalIPs: true,
    localhostNodePorts: true,
    componentStatusz: true,
    componentFlagz: true,
  });
  assert.equal(gateEnabled({}, "LoggingAlphaOptions"), false);
  assert.throws(() => gateEnabled({}, "Nope"), /not registered/);
  for (const [name, spec] of PROXY_GATES) {
    assert.ok(spec.stage, name);
    if (spec.locked) assert.equal(spec.stage, "GA", name);
  }
});

Deno.test("featureGates in the config file: merged with the flag, gate by gate", () => {
  const file = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
featureGates:
  AllowServiceExternalIPs: false
  ComponentFlagz: false
`;
  const c = parseArgs(["--config=/f", "--feature-gates=ComponentFlagz=true"], () => file);
  assert.deepEqual(c.featureGates, { AllowServiceExternalIPs: false, ComponentFlagz: true });
  assert.equal(c.gates.allowServiceExternalIPs, false);
  assert.equal(c.gates.componentFlagz, true);
  assert.ok(!c.warnings.some((w) => w.includes(`"featureGates"`)), c.warnings.join("|"));
  fails(
    ["--config=/f"],
    "--feature-gates / featureGates: unrecognized feature gate: Bogus",
    file + "  Bogus: true\n",
  );
  fails(
    ["--config=/f"],
    `config file: field "featureGates": expected a map of names to true or false, got map`,
    file.replace("ComponentFlagz: false", "ComponentFlagz: maybe"),
  );
  // --version prints before the gates are checked, as upstream's verflag does.
  assert.equal(parseArgs(["--version", "--feature-gates=Bogus=true"]).version, true);
});

Deno.test("KubeProxyNFTablesLocalhostNodePorts: beta and on by default (1.38); off turns the proxy off", () => {
  assert.equal(parseArgs([]).gates.localhostNodePorts, true);
  const lo = parseArgs(["--nodeport-addresses=127.0.0.0/8"]);
  assert.ok(!lo.warnings.some((w) => w.includes("KubeProxyNFTablesLocalhostNodePorts")));
  const off = parseArgs([
    "--nodeport-addresses=127.0.0.0/8",
    "--feature-gates=KubeProxyNFTablesLocalhostNodePorts=false",
  ]);
  assert.equal(off.gates.localhostNodePorts, false);
});
