/**
 * The one place this program loads a native library. Every binding goes
 * through {@link dlopen}, so one switch refuses them all: the unit tests run
 * with KNP_REFUSE_NATIVE=1 (set by `deno task test`), which makes them pass
 * on a machine without libnftables or libnetfilter_conntrack, as a fresh
 * user's machine is. Anything that needs a real library belongs in
 * `test:e2e`.
 *
 * @module
 */

/** Raised instead of loading a library while native loading is refused. */
export class NativeRefusedError extends Error {
  /** `library` was to be opened while KNP_REFUSE_NATIVE=1. */
  constructor(readonly library: string) {
    super(
      `loading ${library} is refused (KNP_REFUSE_NATIVE=1: unit tests run without native ` +
        `libraries; a test that needs one belongs in tests/e2e)`,
    );
    this.name = "NativeRefusedError";
  }
}

/** True while native loading is refused. */
export function nativeRefused(): boolean {
  try {
    return Deno.env.get("KNP_REFUSE_NATIVE") === "1";
  } catch {
    return false;
  }
}

/** `Deno.dlopen`, unless native loading is refused. */
export function dlopen<S extends Deno.ForeignLibraryInterface>(
  path: string,
  symbols: S,
): Deno.DynamicLibrary<S> {
  if (nativeRefused()) throw new NativeRefusedError(path);
  return Deno.dlopen(path, symbols);
}
