/**
 * errno values, their names, and the one place nft's error text becomes an
 * errno. Pure: no FFI (the libc binding's strerror is in libc.ts).
 *
 * The netlink paths hold the kernel's errno and pass it on. libnftables only
 * prints text, and that text ends with the kernel's strerror(3) words
 * ("Could not process rule: No such file or directory"), so
 * {@link errnoOfNftMessage} maps it back once, at the edge, as knftables'
 * `wrapError` does (error.go).
 *
 * @module
 */

/** No such file or directory: the object does not exist. */
export const ENOENT = 2;
/** File exists: the object already exists. */
export const EEXIST = 17;
/** Interrupted system call. */
export const EINTR = 4;
/** Resource temporarily unavailable (a receive timed out). */
export const EAGAIN = 11;

/** Name and glibc strerror(3) text of the errno values netlink, nftables and conntrack produce. */
const ERRNOS: ReadonlyArray<readonly [number, string, string]> = [
  // Tried in this order against nft's text: the two kinds callers test come first.
  [ENOENT, "ENOENT", "No such file or directory"],
  [EEXIST, "EEXIST", "File exists"],
  [1, "EPERM", "Operation not permitted"],
  [EINTR, "EINTR", "Interrupted system call"],
  [5, "EIO", "Input/output error"],
  [7, "E2BIG", "Argument list too long"],
  [9, "EBADF", "Bad file descriptor"],
  [EAGAIN, "EAGAIN", "Resource temporarily unavailable"],
  [12, "ENOMEM", "Cannot allocate memory"],
  [13, "EACCES", "Permission denied"],
  [16, "EBUSY", "Device or resource busy"],
  [21, "EISDIR", "Is a directory"],
  [22, "EINVAL", "Invalid argument"],
  [28, "ENOSPC", "No space left on device"],
  [30, "EROFS", "Read-only file system"],
  [31, "EMLINK", "Too many links"],
  [34, "ERANGE", "Numerical result out of range"],
  [40, "ELOOP", "Too many levels of symbolic links"],
  [61, "ENODATA", "No data available"],
  [75, "EOVERFLOW", "Value too large for defined data type"],
  [90, "EMSGSIZE", "Message too long"],
  [93, "EPROTONOSUPPORT", "Protocol not supported"],
  [95, "EOPNOTSUPP", "Operation not supported"],
  [97, "EAFNOSUPPORT", "Address family not supported by protocol"],
  [105, "ENOBUFS", "No buffer space available"],
  [110, "ETIMEDOUT", "Connection timed out"],
];

const NAMES = new Map(ERRNOS.map(([n, name]) => [n, name]));

/** Name of an errno value (`ENOENT`), or `errno N` when unknown. */
export function errnoName(errno: number): string {
  return NAMES.get(errno) ?? `errno ${errno}`;
}

/**
 * The errno an nft error message reports, or undefined when it names none
 * (a syntax error, a datatype mismatch). "does not exist" counts as ENOENT:
 * nft says so for objects its own cache lacks.
 */
export function errnoOfNftMessage(message: string): number | undefined {
  const m = message.toLowerCase();
  if (m.includes("does not exist")) return ENOENT;
  for (const [n, , text] of ERRNOS) if (m.includes(text.toLowerCase())) return n;
  return undefined;
}
