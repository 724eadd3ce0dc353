/**
 * The open-file limit. The localhost NodePort proxy holds two descriptors per relayed connection,
 * and a container's soft RLIMIT_NOFILE is often 1024 while its hard limit is far higher. Go
 * raises the soft limit to the hard one at start-up (so kube-proxy gets it for free); Deno does
 * not, so the proxy does it here.
 *
 * @module
 */
import { lastErrno, libc, strerror } from "./libc.ts";

/** RLIMIT_NOFILE on Linux. */
const RLIMIT_NOFILE = 7;

/** A limit pair; `Infinity` stands for RLIM_INFINITY. */
export interface FileLimit {
  /** The soft limit: what the process may open now. */
  soft: number;
  /** The hard limit: the most the soft limit may be raised to without privilege. */
  hard: number;
}

function read(): BigUint64Array {
  const lim = new BigUint64Array(2);
  if (libc().getrlimit(RLIMIT_NOFILE, lim) !== 0) {
    throw new Error(`getrlimit(RLIMIT_NOFILE): ${strerror(lastErrno())}`);
  }
  return lim;
}

const num = (v: bigint): number => (v === 0xffffffffffffffffn ? Infinity : Number(v));

/** The open-file limits now. */
export function fileLimit(): FileLimit {
  const lim = read();
  return { soft: num(lim[0]), hard: num(lim[1]) };
}

/** Raises the soft open-file limit to the hard one; returns the limits before and after. */
export function raiseFileLimit(): { before: FileLimit; after: FileLimit } {
  const lim = read();
  const before = { soft: num(lim[0]), hard: num(lim[1]) };
  if (lim[0] < lim[1]) {
    lim[0] = lim[1];
    if (libc().setrlimit(RLIMIT_NOFILE, lim) !== 0) {
      throw new Error(`setrlimit(RLIMIT_NOFILE): ${strerror(lastErrno())}`);
    }
  }
  const now = read();
  return { before, after: { soft: num(now[0]), hard: num(now[1]) } };
}
