import assert from "node:assert/strict";
import {
  candidatePaths,
  LIBRARY_PACKAGES,
  libraryDir,
  openLibrary,
  setLibraryDir,
} from "./libpath.ts";
import { LibraryNotFoundError } from "./conntrack/types.ts";

const SYMS = { nft_ctx_new: { parameters: ["u32"], result: "pointer" } } as const;

Deno.test("openLibrary: a missing library names the .so, the packages and the env var", () => {
  const dir = Deno.makeTempDirSync();
  try {
    setLibraryDir(dir);
    assert.throws(
      () =>
        openLibrary("libknp-bogus.so.9", SYMS, "Debian/Ubuntu: knp-bogus9; Fedora/RHEL: knp-bogus"),
      (e: unknown) => {
        assert.ok(e instanceof LibraryNotFoundError);
        assert.equal(e.library, "libknp-bogus.so.9");
        assert.match(e.message, /cannot load libknp-bogus\.so\.9/);
        assert.match(e.message, /Debian\/Ubuntu: knp-bogus9; Fedora\/RHEL: knp-bogus/);
        assert.match(e.message, /KUBE_NFT_PROXY_LIB_DIR/);
        // The loader's own reason is kept, and it is the configured directory's.
        assert.ok(e.message.includes(dir), e.message);
        return true;
      },
    );
  } finally {
    setLibraryDir(undefined);
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("openLibrary: default package hints for the two libraries we bind", () => {
  assert.equal(
    LIBRARY_PACKAGES["libnftables.so.1"],
    "Debian/Ubuntu: libnftables1; Fedora/RHEL: nftables",
  );
  assert.equal(
    LIBRARY_PACKAGES["libnetfilter_conntrack.so.3"],
    "Debian/Ubuntu: libnetfilter-conntrack3; Fedora/RHEL: libnetfilter_conntrack",
  );
  const dir = Deno.makeTempDirSync();
  try {
    setLibraryDir(dir);
    // A soname with no entry in LIBRARY_PACKAGES still gets an actionable hint.
    assert.throws(
      () => openLibrary("libknp-nothing.so.1", SYMS),
      /the package providing libknp-nothing\.so\.1/,
    );
  } finally {
    setLibraryDir(undefined);
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("candidatePaths: configured dir first, then the bare soname", () => {
  const saved = Deno.env.get("KUBE_NFT_PROXY_LIB_DIR");
  try {
    Deno.env.delete("KUBE_NFT_PROXY_LIB_DIR");
    setLibraryDir(undefined);
    assert.equal(libraryDir(), undefined);
    assert.deepEqual(candidatePaths("libx.so.1"), ["libx.so.1"]);
    Deno.env.set("KUBE_NFT_PROXY_LIB_DIR", "/opt/env/");
    assert.deepEqual(candidatePaths("libx.so.1"), ["/opt/env/libx.so.1", "libx.so.1"]);
    setLibraryDir("/opt/flag");
    assert.deepEqual(candidatePaths("libx.so.1"), ["/opt/flag/libx.so.1", "libx.so.1"]);
  } finally {
    setLibraryDir(undefined);
    if (saved === undefined) Deno.env.delete("KUBE_NFT_PROXY_LIB_DIR");
    else Deno.env.set("KUBE_NFT_PROXY_LIB_DIR", saved);
  }
});
