/**
 * Copies bytes both ways between a client connection and its backend until both sides have
 * finished, passing a half-close on (EOF from one side becomes a write shutdown on the other).
 * Each direction awaits its write before the next read, so a slow reader slows only its own
 * connection and memory stays bounded; buffers start small (idle connections are cheap) and
 * grow while reads keep filling them (bulk transfers move in large chunks).
 *
 * @module
 */

/** The part of a Deno.Conn the relay uses (a fake in unit tests). */
export interface RelayConn {
  /** Reads into `p`; resolves to the byte count, or null at EOF. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes from `p`; resolves to the bytes written (possibly fewer than asked). */
  write(p: Uint8Array): Promise<number>;
  /** Shuts down the write side (TCP FIN), passing a half-close on to the peer. */
  closeWrite(): Promise<void>;
  /** Closes both directions and releases the socket. */
  close(): void;
}

const MIN_BUFFER = 4 * 1024;
const MAX_BUFFER = 64 * 1024;

/** Writes all of `p`. */
async function writeAll(dst: RelayConn, p: Uint8Array): Promise<void> {
  let off = 0;
  while (off < p.length) off += await dst.write(p.subarray(off));
}

/** Copies src to dst until EOF, then shuts dst's write side. Returns the bytes copied. */
export async function pipe(src: RelayConn, dst: RelayConn): Promise<number> {
  let buf = new Uint8Array(MIN_BUFFER);
  let total = 0;
  for (;;) {
    const n = await src.read(buf);
    if (n === null) break;
    await writeAll(dst, buf.subarray(0, n));
    total += n;
    if (n === buf.length && buf.length < MAX_BUFFER) buf = new Uint8Array(buf.length * 4);
  }
  await dst.closeWrite();
  return total;
}

function closeQuietly(c: RelayConn): void {
  try {
    c.close();
  } catch {
    // Already closed.
  }
}

/**
 * Relays between `client` and `backend` until both directions end; an error in either closes
 * both (the peer sees a reset or EOF, as with a kernel path whose endpoint went away). Never
 * throws; resolves to the error that ended it, if any.
 */
export async function relay(client: RelayConn, backend: RelayConn): Promise<unknown> {
  let failure: unknown;
  const run = (src: RelayConn, dst: RelayConn) =>
    pipe(src, dst).catch((err) => {
      failure ??= err;
      closeQuietly(client);
      closeQuietly(backend);
    });
  await Promise.all([run(client, backend), run(backend, client)]);
  closeQuietly(client);
  closeQuietly(backend);
  return failure;
}
