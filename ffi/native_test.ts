import assert from "node:assert/strict";
import { dlopen, nativeRefused, NativeRefusedError } from "./native.ts";
import { openLibrary } from "./libpath.ts";
import { LibraryNotFoundError } from "./conntrack/types.ts";

const root = new URL("../", import.meta.url).pathname;

/** Every .ts file of the project, outside dependencies and tools. */
function* sources(dir: string): Generator<string> {
  for (const e of Deno.readDirSync(dir)) {
    if (e.name.startsWith(".") || e.name === "node_modules") continue;
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) yield* sources(path);
    else if (e.name.endsWith(".ts")) yield path;
  }
}

Deno.test("the unit tests run with native loading refused", () => {
  // `deno task test` sets the switch; running a unit file by hand should too.
  assert.equal(nativeRefused(), true, "run unit tests through `deno task test`");
  assert.throws(() => dlopen("libc.so.6", {}), NativeRefusedError);
  assert.throws(
    () => openLibrary("libnftables.so.1", {}),
    // Refusal looks like a fresh machine: the library is missing, and says why.
    (e: unknown) => e instanceof LibraryNotFoundError && /KNP_REFUSE_NATIVE=1/.test(e.message),
  );
});

Deno.test("ffi/native.ts is the only caller of Deno.dlopen", () => {
  const offenders: string[] = [];
  for (const path of sources(root.replace(/\/$/, ""))) {
    if (path.endsWith("/ffi/native.ts") || path.endsWith("/ffi/native_test.ts")) continue;
    if (/Deno\.dlopen\s*\(/.test(Deno.readTextFileSync(path))) {
      offenders.push(path.slice(root.length));
    }
  }
  assert.deepEqual(offenders, [], "load libraries through ffi/native.ts so the switch covers them");
});
