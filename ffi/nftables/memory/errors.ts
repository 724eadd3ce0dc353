/**
 * The errors of the in-memory nftables: errno texts as nft prints them, and
 * the op-level failure that the client turns into an {@link NftablesError}.
 *
 * @module
 */
/** errno text of a missing object. */
export const ENOENT = "No such file or directory";
/** errno text of an existing object. */
export const EEXIST = "File exists";
/** errno text of an object still in use. */
export const EBUSY = "Device or resource busy";
/** errno text of a change the kernel does not support. */
export const EOPNOTSUPP = "Operation not supported";
/** errno text of a jump loop or a too deep jump path. */
export const EMLINK = "Too many links";

/** The kernel's NFT_JUMP_STACK_SIZE: a chain 16 jumps below a base chain is refused. */
export const MAX_JUMP_DEPTH = 16;

/** A validation failure inside one op; run() turns it into an NftablesError. */
export class OpError extends Error {}

/** Throws an {@link OpError} carrying the errno text, as the kernel reports it. */
export function fail(errno: string, detail: string): never {
  throw new OpError(`${errno}: ${detail}`);
}

/** Throws an {@link OpError} without errno: what nft itself refuses before the kernel sees it. */
export function invalid(detail: string): never {
  throw new OpError(detail);
}
