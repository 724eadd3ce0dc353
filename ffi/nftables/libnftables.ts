/**
 * Thin binding of libnftables.so.1: a context that runs nft script text and
 * returns what libnftables printed. Everything nft-specific (rendering,
 * parsing, error mapping) lives in the client; this module only moves bytes.
 *
 * @module
 */
import { openLibrary } from "../libpath.ts";
import { libc } from "../libc.ts";

/** Output flags of `nft_ctx_output_set_flags` (libnftables.h). */
export const OutputFlag = {
  REVERSEDNS: 1 << 0,
  SERVICE: 1 << 1,
  STATELESS: 1 << 2,
  HANDLE: 1 << 3,
  JSON: 1 << 4,
  ECHO: 1 << 5,
  GUID: 1 << 6,
  NUMERIC_PROTO: 1 << 7,
  NUMERIC_PRIO: 1 << 8,
  NUMERIC_SYMBOL: 1 << 9,
  NUMERIC_TIME: 1 << 10,
  TERSE: 1 << 11,
} as const;

/** The symbols we use. `run_async` is the same C function, run on a worker thread. */
export const SYMBOLS = {
  nft_ctx_new: { parameters: ["u32"], result: "pointer" },
  nft_ctx_free: { parameters: ["pointer"], result: "void" },
  nft_ctx_output_set_flags: { parameters: ["pointer", "u32"], result: "void" },
  nft_ctx_buffer_output: { parameters: ["pointer"], result: "i32" },
  nft_ctx_buffer_error: { parameters: ["pointer"], result: "i32" },
  nft_ctx_get_output_buffer: { parameters: ["pointer"], result: "pointer" },
  nft_ctx_get_error_buffer: { parameters: ["pointer"], result: "pointer" },
  nft_ctx_set_dry_run: { parameters: ["pointer", "bool"], result: "void" },
  nft_run_cmd_from_buffer: { parameters: ["pointer", "buffer"], result: "i32" },
  run_async: {
    name: "nft_run_cmd_from_buffer",
    parameters: ["pointer", "buffer"],
    result: "i32",
    nonblocking: true,
  },
  run_file_async: {
    name: "nft_run_cmd_from_filename",
    parameters: ["pointer", "buffer"],
    result: "i32",
    nonblocking: true,
  },
} as const satisfies Deno.ForeignLibraryInterface;

const MFD_CLOEXEC = 1;

/** The opened library. */
export type NftLib = Deno.DynamicLibrary<typeof SYMBOLS>;

let shared: NftLib | undefined;

/** Opens libnftables.so.1 once per process. Throws LibraryNotFoundError. */
function loadLibnftables(): NftLib {
  shared ??= openLibrary("libnftables.so.1", SYMBOLS);
  return shared;
}

/** What one command buffer produced. */
export interface RunResult {
  /** libnftables' return code: 0 on success. */
  rc: number;
  /** Text written to the output buffer (listings). */
  output: string;
  /** Text written to the error buffer (diagnostics). */
  error: string;
}

const encoder = new TextEncoder();

function cstring(s: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(encoder.encode(s).length + 1);
  encoder.encodeInto(s, bytes);
  return bytes; // last byte stays 0: the terminator
}

function readBuffer(p: Deno.PointerValue): string {
  return p === null ? "" : Deno.UnsafePointerView.getCString(p);
}

/**
 * One `struct nft_ctx` with buffered output and error streams. Not safe for
 * concurrent use: callers serialise (the client keeps a promise queue).
 */
export class NftContext {
  #ptr: Deno.PointerObject | null;
  #inflight: Uint8Array | null = null;
  readonly #lib: NftLib;

  /** A new libnftables context with `flags` (NFT_CTX_*) on `lib`. */
  constructor(lib: NftLib = loadLibnftables(), flags = 0) {
    this.#lib = lib;
    const p = lib.symbols.nft_ctx_new(0);
    if (p === null) throw new Error("nft_ctx_new failed (out of memory?)");
    this.#ptr = p;
    if (lib.symbols.nft_ctx_buffer_output(p) !== 0 || lib.symbols.nft_ctx_buffer_error(p) !== 0) {
      lib.symbols.nft_ctx_free(p);
      this.#ptr = null;
      throw new Error("nft_ctx_buffer_output/error failed");
    }
    lib.symbols.nft_ctx_output_set_flags(p, flags);
  }

  /** The context, or an error once closed. */
  get #live(): Deno.PointerObject {
    if (this.#ptr === null) throw new Error("nftables context is closed");
    return this.#ptr;
  }

  /** Sets the output flags (see {@link OutputFlag}). */
  setOutputFlags(flags: number): void {
    this.#lib.symbols.nft_ctx_output_set_flags(this.#live, flags);
  }

  /** Turns dry-run mode on or off: commands are validated by the kernel but not committed. */
  setDryRun(on: boolean): void {
    this.#lib.symbols.nft_ctx_set_dry_run(this.#live, on);
  }

  /** Runs a command buffer on the calling thread. */
  runSync(script: string): RunResult {
    const ptr = this.#live;
    const rc = this.#lib.symbols.nft_run_cmd_from_buffer(ptr, cstring(script));
    return this.#collect(ptr, rc);
  }

  /** Runs a command buffer on a worker thread, so the event loop keeps running. */
  async run(script: string): Promise<RunResult> {
    const ptr = this.#live;
    // The worker thread reads the buffer: keep it referenced until the call settles.
    const buf = cstring(script);
    this.#inflight = buf;
    try {
      const rc = await this.#lib.symbols.run_async(ptr, buf);
      return this.#collect(ptr, rc);
    } finally {
      this.#inflight = null;
    }
  }

  /**
   * Runs a script as a file (an anonymous memfd, read through /proc/self/fd),
   * so that libnftables prints `FILE:LINE:COL: Error:` locations, which it
   * does not do for buffer input. Used only to diagnose failures. Throws when
   * libc or memfd_create is unavailable.
   */
  async runAsFile(script: string): Promise<RunResult> {
    const ptr = this.#live;
    const c = libc();
    const fd = c.memfd_create(cstring("knp-nft-script"), MFD_CLOEXEC);
    if (fd < 0) throw new Error("memfd_create failed");
    try {
      const bytes = encoder.encode(script);
      let off = 0;
      while (off < bytes.length) {
        const n = Number(c.write(fd, bytes.subarray(off), BigInt(bytes.length - off)));
        if (n <= 0) throw new Error("write to memfd failed");
        off += n;
      }
      const path = cstring(`/proc/self/fd/${fd}`);
      this.#inflight = path;
      try {
        const rc = await this.#lib.symbols.run_file_async(ptr, path);
        return this.#collect(ptr, rc);
      } finally {
        this.#inflight = null;
      }
    } finally {
      c.close(fd);
    }
  }

  /** This call's output and error text, with its return code. */
  #collect(ptr: Deno.PointerObject, rc: number): RunResult {
    // get_*_buffer rewinds the stream, so each read returns only this call's text.
    const output = readBuffer(this.#lib.symbols.nft_ctx_get_output_buffer(ptr));
    const error = readBuffer(this.#lib.symbols.nft_ctx_get_error_buffer(ptr));
    return { rc, output, error };
  }

  /** True once {@link free} ran. */
  get closed(): boolean {
    return this.#ptr === null;
  }

  /** Frees the context. Idempotent. */
  free(): void {
    if (this.#ptr !== null) {
      this.#lib.symbols.nft_ctx_free(this.#ptr);
      this.#ptr = null;
    }
  }
}
