import assert from "node:assert/strict";
import {
  loopbackNodePorts,
  nodePortAddressErrors,
  parseNodePortAddresses,
  selectNodePortIPs,
} from "./nodeport_addresses.ts";

const BAD = "must be a valid CIDR or one of 'primary', 'localhost', 'all'";
const ALONE = "'all' can't be combined with other values";
const at = (i: number, v: string, why: string) =>
  `NodePortAddresses[${i}]: Invalid value: ${JSON.stringify(v)}: ${why}`;

// Upstream's TestValidateKubeProxyNodePortAddress cases (pkg/proxy/apis/config/validation), with
// the 1.37 keyword cases of issue 20: keywords mix with each other and with CIDRs; `all` alone.
const CASES: [string, string[], string[]][] = [
  ["no addresses", [], []],
  ["valid 1", ["127.0.0.0/8"], []],
  ["valid 2", ["0.0.0.0/0"], []],
  ["valid 3", ["::/0"], []],
  ["valid 4", ["127.0.0.1/32", "1.2.3.0/24"], []],
  ["valid 6", ["::1/128"], []],
  ["valid 11", ["2001:db8::/32"], []],
  ["primary", ["primary"], []],
  ["localhost", ["localhost"], []],
  ["all", ["all"], []],
  ["primary, localhost", ["primary", "localhost"], []],
  ["primary and a CIDR (1.37)", ["primary", "198.18.0.0/24"], []],
  ["a CIDR and primary (1.37)", ["198.18.0.0/24", "primary"], []],
  ["keywords and CIDRs", ["localhost", "2001:db8::/64", "primary"], []],
  ["zero CIDR with loopback (upstream allows it)", ["0.0.0.0/0", "127.0.0.1/32"], []],
  ["sloppy leading zeros", ["198.018.0.0/16"], []],
  ["invalid foo address", ["foo"], [at(0, "foo", BAD)]],
  ["invalid octet address", ["10.0.0.0/0", "1.2.3"], [at(1, "1.2.3", BAD)]],
  ["address cannot be 0", ["127.0.0.1/32", "0", "1.2.3.0/24"], [at(1, "0", BAD)]],
  ["address missing subnet range", ["127.0.0.1/32", "10.20.30.40"], [at(1, "10.20.30.40", BAD)]],
  ["missing ipv6 subnet ranges", ["::0", "::1", "2001:db8::/32"], [
    at(0, "::0", BAD),
    at(1, "::1", BAD),
  ]],
  ["invalid ipv6 ip format", ["::1/128", "2001:db8:xyz/64"], [at(1, "2001:db8:xyz/64", BAD)]],
  ["keywords are case-sensitive", ["Primary"], [at(0, "Primary", BAD)]],
  ["an interface name", ["eth0"], [at(0, "eth0", BAD)]],
  ["all with primary", ["all", "primary"], [at(0, "all", ALONE)]],
  ["primary with all", ["primary", "all"], [at(1, "all", ALONE)]],
  ["all with a CIDR", ["198.18.0.0/24", "all"], [at(1, "all", ALONE)]],
  ["all twice", ["all", "all"], [at(0, "all", ALONE), at(1, "all", ALONE)]],
  ["all with localhost and a bad entry", ["all", "localhost", "x"], [
    at(0, "all", ALONE),
    at(2, "x", BAD),
  ]],
];

for (const [name, items, want] of CASES) {
  Deno.test(`nodePortAddresses validation: ${name}`, () => {
    assert.deepEqual(nodePortAddressErrors(items), want);
    if (want.length === 0) parseNodePortAddresses(items);
    else assert.throws(() => parseNodePortAddresses(items), { message: want.join("; ") });
  });
}

Deno.test("nodePortAddresses: empty means primary (nftables mode)", () => {
  assert.deepEqual(parseNodePortAddresses([]), {
    primary: true,
    localhost: false,
    all: false,
    cidrs: [],
  });
});

const NODE = ["198.18.0.2", "2001:db8::2"];
const HOST = ["127.0.0.1", "198.18.0.2", "198.18.7.9", "198.19.1.1", "::1", "2001:db8::2"];
const sel = (items: string[], fam: 4 | 6, host: string[] | null = HOST) =>
  selectNodePortIPs(parseNodePortAddresses(items), fam, NODE, host ?? undefined);

Deno.test("selectNodePortIPs: primary is the Node object's address of the family", () => {
  assert.deepEqual(sel([], 4), ["198.18.0.2"]);
  assert.deepEqual(sel(["primary"], 6), ["2001:db8::2"]);
});

Deno.test("selectNodePortIPs: CIDRs select this host's interface addresses", () => {
  // 198.18.7.9 is on an interface but not in the Node object: upstream answers on it.
  assert.deepEqual(sel(["198.18.0.0/16"], 4), ["198.18.0.2", "198.18.7.9"]);
  assert.deepEqual(sel(["198.18.7.0/24"], 4), ["198.18.7.9"]);
  assert.deepEqual(sel(["198.18.9.0/24"], 4), []);
  // Without the host's addresses (dry runs, unit tests), CIDRs select among the Node's.
  assert.deepEqual(sel(["198.18.0.0/16"], 4, null), ["198.18.0.2"]);
});

Deno.test("selectNodePortIPs: primary mixed with CIDRs is the union", () => {
  assert.deepEqual(sel(["primary", "198.19.0.0/16"], 4), ["198.18.0.2", "198.19.1.1"]);
  assert.deepEqual(sel(["198.18.7.9/32", "primary"], 4), ["198.18.0.2", "198.18.7.9"]);
});

Deno.test("selectNodePortIPs: all, and the zero CIDR of the family, match every address", () => {
  assert.equal(sel(["all"], 4), "all");
  assert.equal(sel(["all"], 6), "all");
  assert.equal(sel(["0.0.0.0/0", "127.0.0.1/32"], 4), "all");
  assert.deepEqual(sel(["0.0.0.0/0", "::1/128"], 6), ["::1"]);
});

Deno.test("selectNodePortIPs: a family with no entry matches all, as upstream defaults it", () => {
  // pkg/proxy/util/nodeport_addresses.go: no CIDR of the family -> the zero CIDR.
  assert.equal(sel(["198.18.0.0/16"], 6), "all");
  // `primary` is an entry of a family only where the Node has an address of it.
  assert.equal(selectNodePortIPs(parseNodePortAddresses(["primary"]), 6, ["198.18.0.2"]), "all");
  // `localhost` is an entry of both families.
  assert.deepEqual(sel(["198.18.0.0/16", "localhost"], 6), ["::1"]);
});

Deno.test("selectNodePortIPs: localhost selects the loopback address of the family", () => {
  assert.deepEqual(sel(["primary", "localhost"], 4), ["127.0.0.1", "198.18.0.2"]);
  assert.deepEqual(sel(["localhost"], 6), ["::1"]);
  assert.deepEqual(sel(["127.0.0.0/8"], 4), ["127.0.0.1"]);
});

const lo = (items: string[]) => loopbackNodePorts(parseNodePortAddresses(items));

Deno.test("loopbackNodePorts: localhost and loopback CIDRs; all does not count", () => {
  assert.deepEqual(lo([]), { ipv4: false, ipv6: false });
  assert.deepEqual(lo(["primary"]), { ipv4: false, ipv6: false });
  assert.deepEqual(lo(["localhost"]), { ipv4: true, ipv6: true });
  assert.deepEqual(lo(["primary", "localhost"]), { ipv4: true, ipv6: true });
  assert.deepEqual(lo(["127.0.0.1/32"]), { ipv4: true, ipv6: false });
  assert.deepEqual(lo(["127.0.0.0/8", "198.18.0.0/24"]), { ipv4: true, ipv6: false });
  assert.deepEqual(lo(["::1/128"]), { ipv4: false, ipv6: true });
  // 127.0.0.2/32 is loopback but not the address the proxy binds (kubernetes issue 142129).
  assert.deepEqual(lo(["127.0.0.2/32"]), { ipv4: false, ipv6: false });
  assert.deepEqual(lo(["all"]), { ipv4: false, ipv6: false });
  // A family that matches every address does not count (KEP-6032: "0.0.0.0/0,localhost").
  assert.deepEqual(lo(["0.0.0.0/0", "localhost"]), { ipv4: false, ipv6: true });
  assert.deepEqual(lo(["0.0.0.0/0", "127.0.0.1/32"]), { ipv4: false, ipv6: false });
});
