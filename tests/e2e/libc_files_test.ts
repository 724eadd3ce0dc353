/**
 * The libc file helpers against real files. They load libc.so.6, so they run
 * with the e2e suite; the unit tests refuse native loading.
 */
import assert from "node:assert/strict";
import { e2eTest } from "../netns.ts";
import { LibcFileError, readTextFileSync, writeTextFileSync } from "../../ffi/libc_files.ts";

e2eTest("reads kernel files and round-trips a regular file through libc", () => {
  assert.equal(readTextFileSync("/proc/sys/kernel/ostype").trim(), "Linux");
  const p = Deno.makeTempFileSync();
  try {
    Deno.writeTextFileSync(p, "old value that is longer\n");
    writeTextFileSync(p, "42\n");
    // No O_TRUNC, as sysctl files: the rest of the old bytes stay in a regular file.
    assert.match(readTextFileSync(p), /^42\n/);
  } finally {
    Deno.removeSync(p);
  }
});

e2eTest("a missing file is NotFound; a directory is a LibcFileError with a code", () => {
  assert.throws(() => readTextFileSync("/nonexistent/knp"), Deno.errors.NotFound);
  assert.throws(
    () => writeTextFileSync("/proc", "1"),
    (e: unknown) => e instanceof LibcFileError && e.code === "EISDIR",
  );
});
