import assert from "node:assert/strict";
import { parseEndpoints, runDebug } from "./cli.ts";

const CLUSTER = new URL("../../demo/cluster.yaml", import.meta.url).pathname;
const DRY = [
  "--dry-run",
  "--objects",
  CLUSTER,
  "--hostname-override",
  "knp-demo-node",
  "--cluster-cidr",
  "198.18.1.0/24,2001:db8:1::/64",
];

async function capture(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [], err: string[] = [];
  const log = console.log, error = console.error;
  console.log = (...a: unknown[]) => out.push(a.join(" "));
  console.error = (...a: unknown[]) => err.push(a.join(" "));
  try {
    const code = await runDebug(args);
    return { code, out: out.join("\n"), err: err.join("\n") };
  } finally {
    console.log = log;
    console.error = error;
  }
}

Deno.test("trace --dry-run: a ClusterIP from outside is DNATed to two endpoints and masqueraded", async () => {
  const r = await capture(["trace", ...DRY, "--from", "198.18.3.2", "--to", "198.19.0.10:80/tcp"]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /-> frontends-dnat-tcp-2: 198\.19\.0\.10 \. tcp \. 80 \(default\/web:http\)/);
  assert.match(r.out, /198\.18\.1\.2:8080\s+50%\s+masqueraded/);
  const j = await capture([
    "trace",
    ...DRY,
    "--from",
    "198.18.3.2",
    "--to",
    "198.19.0.13:80/tcp",
    "-o",
    "json",
  ]);
  const res = JSON.parse(j.out);
  assert.equal(res.verdict, "REJECT");
  assert.equal(res.reason, "the Service has no endpoints");
  assert.equal(res.packet.from, "offnode");
});

Deno.test("trace --dry-run: IPv6, and the node itself as the source", async () => {
  const r = await capture([
    "trace",
    ...DRY,
    "--from",
    "2001:db8::1",
    "--to",
    "[2001:db8:ffff::10]:80/tcp",
    "-o",
    "json",
  ]);
  assert.equal(r.code, 0, r.err);
  const res = JSON.parse(r.out);
  assert.equal(res.packet.from, "host");
  assert.equal(res.candidates.length, 2);
});

Deno.test("explain --dry-run: every frontend of a Service; an unknown one exits 3", async () => {
  const r = await capture(["explain", "default/web", ...DRY]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /ClusterIP 198\.19\.0\.10 \. tcp \. 80/);
  assert.match(r.out, /NodePort tcp \. 30080/);
  const none = await capture(["explain", "default/nope", ...DRY]);
  assert.equal(none.code, 3);
  assert.match(none.out, /nothing programmed/);
});

Deno.test("trace/explain: bad input is a usage error naming the value", async () => {
  const r = await capture(["trace", ...DRY, "--from", "198.18.3.2", "--to", "198.19.0.10:80"]);
  assert.equal(r.code, 2);
  assert.match(r.err, /--to "198\.19\.0\.10:80": want IP:PORT\/PROTO/);
  assert.throws(
    () => parseEndpoints("198.18.3.2", "[2001:db8::1]:80/tcp"),
    /different IP families/,
  );
  assert.deepEqual(parseEndpoints("198.18.3.2:5555", "198.19.0.1:53/UDP"), {
    src: "198.18.3.2",
    dst: "198.19.0.1",
    dport: 53,
    proto: "udp",
  });
  assert.equal((await capture(["explain", ...DRY])).code, 2);
});
