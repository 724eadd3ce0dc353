/**
 * The demo (demo/main.ts) as a child process: the real-traffic run must pass every check and
 * exit 0 (it builds and deletes its own namespaces); the dry run must print both families'
 * rulesets without needing root or the kernel.
 * @module
 */
import assert from "node:assert/strict";
import { denoBin, e2eTest, repoRoot, run } from "../netns.ts";

const DEMO = `${repoRoot}/demo/main.ts`;

e2eTest("demo: real traffic through the real agent, every check passes", async () => {
  const before = (await run(["ip", "netns", "list"])).stdout;
  const r = await run([denoBin, "run", "-A", DEMO], { check: false });
  const out = r.stdout + r.stderr;
  assert.equal(r.code, 0, out);
  const m = /(\d+)\/(\d+) checks passed\./.exec(r.stdout);
  assert.ok(m && m[1] === m[2] && Number(m[1]) >= 9, out);
  assert.ok(!/^FAIL/m.test(r.stdout), out);
  // Read back: each frontend is an element of its class chain's set.
  assert.match(
    r.stdout,
    /ip kube-proxy frontends-dnat-tcp-\d+ \(\d+ elements\):\n[^]*?198\.19\.0\.10 \. tcp \. 80\n/,
  );
  assert.match(
    r.stdout,
    /ip6 kube-proxy frontends-dnat-tcp-\d+ \(\d+ elements\):\n[^]*?2001:db8:ffff::10 \. tcp \. 80\n/,
  );
  // trace and explain on the live node, as the agent's permissions allow.
  assert.match(
    r.stdout,
    /\$ kube-nft-proxy trace --from 198\.18\.3\.2 --to 198\.19\.0\.10:80\/tcp\n/,
  );
  assert.match(r.stdout, /198\.18\.1\.2:8080\s+50%\s+masqueraded/);
  assert.match(
    r.stdout,
    /NodePort tcp \. 30081[^]*from outside\s+ACCEPT\s+198\.18\.1\.2:8080 100%\n/,
  );
  // Every namespace it made is gone.
  const demoNs = (s: string) => s.split("\n").filter((l) => /-demo[ncp]\d/.test(l)).length;
  assert.equal(demoNs((await run(["ip", "netns", "list"])).stdout), demoNs(before));
});

Deno.test("demo --dry-run: prints the transactions for both families and exits 0", async () => {
  const r = await run([denoBin, "run", "-A", DEMO, "--dry-run"], { check: false });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^add table ip kube-proxy/m);
  assert.match(r.stdout, /^add table ip6 kube-proxy/m);
  assert.match(r.stdout, /frontends-dnat-tcp-2 \{ 198\.19\.0\.10 \. tcp \. 80 /);
  assert.match(r.stdout, /frontends-nodeport-dnat-tcp-2 \{ tcp \. 30080 /);
  // The malformed Service is reported, not programmed.
  assert.match(r.stdout, /default\/broken/);
  assert.doesNotMatch(r.stdout, /^add element .*198\.19\.0\.300/m);
  // trace and explain work without a kernel too.
  assert.match(r.stdout, /verdict: ACCEPT: DNAT/);
  assert.match(r.stdout, /Service default\/local \(ip table\)/);
});

Deno.test("demo: unknown arguments are rejected with usage", async () => {
  const r = await run([denoBin, "run", "-A", DEMO, "--bogus"], { check: false });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown argument --bogus/);
  assert.match(r.stderr, /usage: /);
});
