/**
 * Reads and writes small kernel files (/proc/sys, /sys/module) through libc.
 *
 * Deno refuses any access under /proc or /sys without `--allow-all`, however
 * the read/write permissions are scoped, and the agent never runs with -A.
 * FFI is already granted, so the conntrack sysctls go through open/read/write.
 *
 * @module
 */
import { errnoName } from "./errno.ts";
import { lastErrno, libc as lib, strerror } from "./libc.ts";

const O_RDONLY = 0;
const O_WRONLY = 1;
const O_CLOEXEC = 0o2000000;

/** A failed libc call, with Deno-style `code` (EROFS, EACCES, ...). */
export class LibcFileError extends Error {
  /** A failed call: what was done, on which path, and the errno. */
  constructor(
    readonly code: string,
    readonly errno: number,
    op: string,
    path: string,
    why: string,
  ) {
    super(`${op} ${path}: ${why} (${code})`);
    this.name = "LibcFileError";
  }
}

function fail(op: string, path: string): never {
  const errno = lastErrno();
  const why = strerror(errno);
  const code = errnoName(errno);
  if (errno === 2) throw new Deno.errors.NotFound(`${op} ${path}: ${why}`);
  throw new LibcFileError(code, errno, op, path, why);
}

function cstr(s: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(s + "\0") as Uint8Array<ArrayBuffer>;
}

/** Reads a whole small file (at most 64 KiB). */
export function readTextFileSync(path: string): string {
  const l = lib();
  const fd = l.open(cstr(path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open", path);
  try {
    const buf = new Uint8Array(65536);
    let len = 0;
    while (len < buf.length) {
      const n = Number(l.read(fd, buf.subarray(len), BigInt(buf.length - len)));
      if (n < 0) fail("read", path);
      if (n === 0) break;
      len += n;
    }
    return new TextDecoder().decode(buf.subarray(0, len));
  } finally {
    l.close(fd);
  }
}

/** Writes `text` to an existing file with one write(2), as sysctl files expect. */
export function writeTextFileSync(path: string, text: string): void {
  const l = lib();
  const fd = l.open(cstr(path), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail("open", path);
  try {
    const data = new TextEncoder().encode(text) as Uint8Array<ArrayBuffer>;
    const n = Number(l.write(fd, data, BigInt(data.length)));
    if (n < 0) fail("write", path);
    if (n !== data.length) {
      throw new LibcFileError("EIO", 5, "write", path, `short write (${n} of ${data.length})`);
    }
  } finally {
    l.close(fd);
  }
}

const F_GETFD = 1;

/**
 * How many file descriptors below `tableSize` are open (fcntl F_GETFD on each). Deno refuses
 * to list /proc/self/fd without --allow-all; `tableSize` is FDSize from /proc/self/status.
 */
export function countOpenFds(tableSize: number): number {
  const l = lib();
  let n = 0;
  for (let fd = 0; fd < tableSize; fd++) if (l.fcntl(fd, F_GETFD, 0) >= 0) n++;
  return n;
}
