import assert from "node:assert/strict";
import { watchConfigFile } from "./config_watch.ts";

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await wait(20);
  }
}

Deno.test("an edit in place is noticed; a touch with the same content is not", async () => {
  const dir = Deno.makeTempDirSync();
  const path = `${dir}/config.conf`;
  Deno.writeTextFileSync(path, "a: 1\n");
  let changes = 0;
  const w = watchConfigFile(path, { initial: "a: 1\n", onChange: () => changes++, settleMs: 20 });
  try {
    Deno.writeTextFileSync(path, "a: 1\n");
    Deno.chmodSync(path, 0o600);
    await wait(300);
    assert.equal(changes, 0, "same content must not count");
    Deno.writeTextFileSync(path, "a: 2\n");
    await until("the change", () => changes === 1);
    Deno.writeTextFileSync(path, "a: 3\n");
    await wait(200);
    assert.equal(changes, 1, "reported once");
  } finally {
    w.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("a ConfigMap-style update (the ..data symlink swapped) is noticed", async () => {
  const dir = Deno.makeTempDirSync();
  Deno.mkdirSync(`${dir}/..2026_01`);
  Deno.writeTextFileSync(`${dir}/..2026_01/config.conf`, "v: 1\n");
  Deno.symlinkSync("..2026_01", `${dir}/..data`);
  Deno.symlinkSync("..data/config.conf", `${dir}/config.conf`);
  let changed = false;
  const w = watchConfigFile(`${dir}/config.conf`, {
    initial: "v: 1\n",
    onChange: () => (changed = true),
    settleMs: 20,
  });
  try {
    // What kubelet's AtomicWriter does: a new timestamped directory, a new ..data_tmp link
    // renamed over ..data, the old directory removed.
    Deno.mkdirSync(`${dir}/..2026_02`);
    Deno.writeTextFileSync(`${dir}/..2026_02/config.conf`, "v: 2\n");
    Deno.symlinkSync("..2026_02", `${dir}/..data_tmp`);
    Deno.renameSync(`${dir}/..data_tmp`, `${dir}/..data`);
    Deno.removeSync(`${dir}/..2026_01`, { recursive: true });
    await until("the swap", () => changed);
  } finally {
    w.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("without events, the poll notices; an unreadable file keeps the agent running", async () => {
  let content = "x";
  let changed = false;
  const w = watchConfigFile("/nonexistent-dir/config.conf", {
    initial: "x",
    onChange: () => (changed = true),
    pollMs: 30,
    read: () => {
      if (content === "gone") return Promise.reject(new Deno.errors.NotFound("gone"));
      return Promise.resolve(content);
    },
  });
  try {
    content = "gone";
    await wait(120);
    assert.equal(changed, false);
    content = "y";
    await until("the poll", () => changed);
  } finally {
    w.close();
  }
});
