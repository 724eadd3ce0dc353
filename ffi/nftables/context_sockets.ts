/**
 * Where the client sees libnftables' socket come into being. libnftables
 * opens it inside its context and never shows it, yet the notification
 * monitor must know its port id to tell our writes from other programs'
 * (ffi/netlink/own_portids.ts). libnftables 1.0.x creates it in nft_ctx_new,
 * unbound, and binds it (a port id) at the first command; so the client
 * scans the descriptors around the context's creation and after its first
 * command, and after the raw writer's first batch (its socket opens then).
 *
 * @module
 */
import { ownNetfilterSockets } from "../netlink/own_portids.ts";
import { NftContext, type NftLib } from "./libnftables.ts";

/** select(2)'s fd_set size: libnftables 1.0.x cannot wait on a descriptor at or above it. */
export const FD_SETSIZE = 1024;

/**
 * Why a context whose socket is descriptor `fd` must not be used, or
 * undefined. libnftables 1.0.x waits for a batch's acks with select(2): at
 * descriptor 1024 or above, glibc's fortified FD_SET aborts the whole process
 * ("bit out of range 0 - FD_SETSIZE on fd_set") at the first write. Measured
 * with 1.0.6: listings work, the first batch (a dry run too) aborts.
 */
export function contextFdHazard(fd: number): string | undefined {
  if (fd < FD_SETSIZE) return undefined;
  return `libnftables' socket would be descriptor ${fd}: libnftables waits on it with ` +
    `select(2), which aborts the process at descriptor ${FD_SETSIZE} or above; ` +
    `nftables clients must be opened before this many descriptors are in use ` +
    `(e.g. the localhost proxy's connections)`;
}

/**
 * A libnftables context with output `flags`, its socket watched (the port id
 * comes at its first command: call {@link noteOwnSockets} then).
 *
 * @throws Error when its socket is at a descriptor libnftables cannot use
 * ({@link contextFdHazard}); the context is freed.
 */
export function newWatchedContext(lib: NftLib | undefined, flags: number): NftContext {
  const own = ownNetfilterSockets();
  if (own === null) return new NftContext(lib, flags); // no libc (unit tests)
  const { value: ctx, fresh } = own.around(() => new NftContext(lib, flags));
  const why = fresh.map(contextFdHazard).find((w) => w !== undefined);
  if (why !== undefined) {
    ctx.free();
    throw new Error(why);
  }
  return ctx;
}

/**
 * Scans this process's descriptors for its netfilter sockets (a full scan:
 * a socket may sit at any descriptor). The client calls it after a context's
 * first command and after the raw writer's first batch.
 */
export function noteOwnSockets(): void {
  ownNetfilterSockets()?.rescan();
}
