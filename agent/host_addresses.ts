/**
 * This host's interface addresses for nodePortAddresses CIDRs, kept current: upstream matches the
 * CIDRs against the node's own interfaces (pkg/proxy/util/nodeport_addresses.go GetNodeIPs), so
 * a NodePort on a secondary address answers, and an address added later starts answering.
 *
 * Why a subscription and not a dump per sync (as upstream): the dump is cheap (a few ms,
 * whatever the number of Services), but a sync only runs when something changes or the periodic
 * timer fires, so on a quiet node a new address would wait up to the sync period. The
 * rtnetlink subscription costs one non-blocking recv(2) a second, and we re-read the addresses
 * and ask for a sync only when the kernel reported a change. A changed list alters the build
 * context and so costs one full sync; addresses change rarely, and at 30k Services that full
 * sync is the price of correctness either way.
 *
 * @module
 */
import { AddressChanges, interfaceAddresses } from "../ffi/netlink/rtnl_addr.ts";
import type { Logger } from "./log.ts";

/** Where the proxiers read the host's addresses from (see NodeClients.hostAddresses). */
export interface HostAddressSource {
  /** The addresses last read, or undefined when they cannot be read (CIDRs then select Node IPs). */
  current(): readonly string[] | undefined;
  /** Calls `onChange` after the address list changed (not for the first read). */
  watch(onChange: () => void): void;
  /** Stops watching and closes the socket. */
  close(): void;
}

/** Options of {@link openHostAddresses}. */
export interface HostAddressOptions {
  /** How often the subscription is read (default 1000 ms). */
  pollMs?: number;
  /** Opens the change subscription (default: rtnetlink's {@link AddressChanges}; tests fake it). */
  subscribe?: () => { drain(): boolean; close(): void };
  /** Reads the addresses (default: an rtnetlink dump, {@link interfaceAddresses}). */
  read?: () => string[];
}

/**
 * Reads the host's addresses and subscribes to their changes. When netlink fails, logs why and
 * returns a source whose `current()` is undefined: the agent keeps serving, with CIDRs matched
 * against the Node object's addresses as before.
 */
export function openHostAddresses(log: Logger, opts: HostAddressOptions = {}): HostAddressSource {
  const read = opts.read ?? interfaceAddresses;
  let changes: { drain(): boolean; close(): void } | undefined;
  let list: string[] | undefined;
  try {
    changes = opts.subscribe ? opts.subscribe() : new AddressChanges();
    list = read();
  } catch (err) {
    changes?.close();
    changes = undefined;
    log.warn(
      "cannot read this host's interface addresses over rtnetlink; nodePortAddresses CIDRs " +
        "select among the Node object's addresses instead",
      { error: (err as Error).message },
    );
  }
  let timer: ReturnType<typeof setInterval> | undefined;
  return {
    current: () => list,
    watch(onChange) {
      if (changes === undefined || timer !== undefined) return;
      timer = setInterval(() => {
        try {
          if (!changes!.drain()) return;
          const next = read();
          if (next.join() === list?.join()) return;
          log.info("host interface addresses changed", { addresses: next.join(",") }, 2);
          list = next;
          onChange();
        } catch (err) {
          // Transient: the next tick tries again; the previous list stays in force meanwhile.
          log.warn("reading host interface addresses failed", { error: (err as Error).message });
        }
      }, opts.pollMs ?? 1000);
      // The watch must not keep the process alive on its own.
      Deno.unrefTimer(timer as unknown as number);
    },
    close() {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      changes?.close();
      changes = undefined;
    },
  };
}
