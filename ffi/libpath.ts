/**
 * Locates and opens native libraries for the FFI bindings.
 *
 * A library is looked up first in the directory given by `setLibraryDir` or
 * `$KUBE_NFT_PROXY_LIB_DIR`, then by bare soname on the system library path.
 * When neither works a {@link LibraryNotFoundError} names the missing `.so`
 * and the distribution packages that provide it.
 *
 * @module
 */
import { dlopen } from "./native.ts";
import { LibraryNotFoundError } from "./conntrack/types.ts";

/** Distribution packages providing the libraries this project binds. */
export const LIBRARY_PACKAGES: Readonly<Record<string, string>> = {
  "libnftables.so.1": "Debian/Ubuntu: libnftables1; Fedora/RHEL: nftables",
  "libnetfilter_conntrack.so.3":
    "Debian/Ubuntu: libnetfilter-conntrack3; Fedora/RHEL: libnetfilter_conntrack",
  "libmnl.so.0": "Debian/Ubuntu: libmnl0; Fedora/RHEL: libmnl",
  "libc.so.6": "the C library (glibc)",
};

let configuredDir: string | undefined;

/**
 * Sets the directory searched before the system library path (e.g. from a
 * `--lib-dir` flag). It overrides `$KUBE_NFT_PROXY_LIB_DIR`; `undefined` clears it.
 */
export function setLibraryDir(dir: string | undefined): void {
  configuredDir = dir === undefined || dir === "" ? undefined : dir.replace(/\/+$/, "");
}

/** The directory searched first, if any: `setLibraryDir`'s, else `$KUBE_NFT_PROXY_LIB_DIR`. */
export function libraryDir(): string | undefined {
  if (configuredDir !== undefined) return configuredDir;
  let env: string | undefined;
  try {
    env = Deno.env.get("KUBE_NFT_PROXY_LIB_DIR");
  } catch {
    // Without --allow-env the variable simply does not apply.
    env = undefined;
  }
  return env === undefined || env === "" ? undefined : env.replace(/\/+$/, "");
}

/** Paths tried, in order, for `soname`. */
export function candidatePaths(soname: string): string[] {
  const dir = libraryDir();
  return dir === undefined ? [soname] : [`${dir}/${soname}`, soname];
}

/**
 * Opens `soname` with `symbols`, trying the configured directory and then the
 * system path. `packages` names what to install when it is missing; it
 * defaults to the entry in {@link LIBRARY_PACKAGES}.
 *
 * @throws LibraryNotFoundError when no candidate loads.
 */
export function openLibrary<S extends Deno.ForeignLibraryInterface>(
  soname: string,
  symbols: S,
  packages: string = LIBRARY_PACKAGES[soname] ?? "the package providing " + soname,
): Deno.DynamicLibrary<S> {
  let firstError: unknown;
  for (const path of candidatePaths(soname)) {
    try {
      return dlopen(path, symbols);
    } catch (e) {
      // A missing symbol in an existing library is as fatal as a missing file,
      // but the first failure is usually the most telling one to show.
      firstError ??= e;
    }
  }
  throw new LibraryNotFoundError(soname, packages, firstError);
}

/**
 * A function that opens `soname` with {@link openLibrary} on its first call
 * and returns the same symbols ever after: each library is opened once per
 * process, by whichever binding needs it first.
 */
export function lazyLibrary<S extends Deno.ForeignLibraryInterface>(
  soname: string,
  symbols: S,
): () => Deno.DynamicLibrary<S>["symbols"] {
  let lib: Deno.DynamicLibrary<S>["symbols"] | undefined;
  return () => lib ??= openLibrary(soname, symbols).symbols;
}
