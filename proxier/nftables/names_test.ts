import assert from "node:assert/strict";
import {
  affinitySetName,
  hash8,
  hashAndTruncate,
  NAME_MAX,
  serviceChainNames,
  servicePortBase,
} from "./names.ts";
import type { ServicePortInfo } from "../model.ts";
import { servicePort } from "../model_testing.ts";

function svc(o: Partial<ServicePortInfo>): ServicePortInfo {
  return servicePort("ns1/svc1:p80", { clusterIP: "172.30.0.41", ...o });
}

Deno.test("hash8 matches upstream kube-proxy's chain names", () => {
  // Known names from upstream's documentation and tests.
  assert.equal(hash8("ns1/svc1/tcp/p80"), "ULMVA6XW");
  assert.equal(hash8("ns1/svc1/tcp/p80__10.180.0.1/80"), "5OJB2KTY");
});

Deno.test("service chain names", () => {
  const n = serviceChainNames(svc({}));
  assert.equal(n.cluster, "service-ULMVA6XW-ns1/svc1/tcp/p80");
  assert.equal(n.local, "local-ULMVA6XW-ns1/svc1/tcp/p80");
  assert.equal(n.external, "external-ULMVA6XW-ns1/svc1/tcp/p80");
  assert.equal(n.firewall, "firewall-ULMVA6XW-ns1/svc1/tcp/p80");
  assert.equal(servicePortBase(svc({ protocol: "SCTP", portName: "" })), "ns1/svc1/sctp/");
});

Deno.test("affinity set names replace IPv6 colons and include the port", () => {
  assert.equal(
    affinitySetName(svc({}), "10.180.0.1", 80),
    "affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80",
  );
  const v6 = affinitySetName(svc({}), "2001:db8::1", 8080);
  assert.ok(v6.endsWith("__2001.db8..1/8080"));
  assert.ok(!v6.includes(":"));
});

Deno.test("long names are truncated but stay unique and within the limit", () => {
  const long = "n".repeat(63);
  const a = serviceChainNames(svc({ namespace: long, name: long, portName: long + "a" }));
  const b = serviceChainNames(svc({ namespace: long, name: long, portName: long + "b" }));
  for (const n of [a.external, a.firewall, b.external]) assert.ok(n.length <= NAME_MAX);
  assert.notEqual(a.cluster, b.cluster);
  const t = hashAndTruncate("x".repeat(400));
  assert.ok(t.endsWith("..."));
  assert.ok(`affinity-${t}`.length <= NAME_MAX);
});

Deno.test("hash8 agrees with node:crypto for every message length up to 300", async () => {
  const { createHash } = await import("node:crypto");
  const B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  for (let n = 0; n <= 300; n++) {
    const s = Array.from({ length: n }, (_, i) => "aZ9/._-é"[(i * 7 + n) % 8]).join("");
    const d = createHash("sha256").update(s).digest();
    let bits = "";
    for (let i = 0; i < 5; i++) bits += d[i].toString(2).padStart(8, "0");
    const want = Array.from({ length: 8 }, (_, i) => B32[parseInt(bits.slice(5 * i, 5 * i + 5), 2)])
      .join("");
    assert.equal(hash8(s), want, `length ${n}`);
  }
});
