/**
 * A fake network for the localhost proxy's unit tests: listeners that accept the connections
 * a test pushes, dials that answer from a table, connections that record what they carry.
 *
 * @module
 */
import type { BoundListener, NetOps, ProxyConn } from "./listener.ts";
import type { Backend } from "./targets.ts";

/** A connection end whose reads come from a queue and whose writes are recorded. */
export class FakeConn implements ProxyConn {
  readonly written: Uint8Array[] = [];
  closed = false;
  writeClosed = false;
  #queue: (Uint8Array | null)[] = [];
  #waiting: ((v: Uint8Array | null) => void) | undefined;
  /** Resolves each write after this promise (a slow reader on the other side). */
  gate: Promise<void> | undefined;

  /** Makes `data` (or EOF, null) the next read. */
  feed(data: Uint8Array | null): void {
    if (this.#waiting) {
      const w = this.#waiting;
      this.#waiting = undefined;
      w(data);
    } else this.#queue.push(data);
  }
  read(p: Uint8Array): Promise<number | null> {
    const take = (d: Uint8Array | null) => {
      if (d === null) return null;
      p.set(d.subarray(0, p.length));
      return Math.min(d.length, p.length);
    };
    if (this.closed) return Promise.reject(new Deno.errors.BadResource("closed"));
    if (this.#queue.length) return Promise.resolve(take(this.#queue.shift()!));
    return new Promise((res) => (this.#waiting = (d) => res(take(d))));
  }
  async write(p: Uint8Array): Promise<number> {
    if (this.gate) await this.gate;
    if (this.closed || this.writeClosed) throw new Deno.errors.BrokenPipe("closed");
    this.written.push(p.slice());
    return p.length;
  }
  closeWrite(): Promise<void> {
    this.writeClosed = true;
    return Promise.resolve();
  }
  close(): void {
    this.closed = true;
    this.#waiting?.(null);
  }
  /** Everything written, as text. */
  text(): string {
    return this.written.map((b) => new TextDecoder().decode(b)).join("");
  }
}

/** A listener the test pushes connections into. */
export class FakeListener implements BoundListener {
  closed = false;
  #pending: FakeConn[] = [];
  #wake: (() => void) | undefined;
  constructor(readonly host: string, readonly port: number) {}
  /** A client connects. */
  connect(c = new FakeConn()): FakeConn {
    this.#pending.push(c);
    this.#wake?.();
    return c;
  }
  close(): void {
    this.closed = true;
    this.#wake?.();
  }
  /** Makes the next accept() fail with `err` (EMFILE and the like). */
  failNext(err: Error): void {
    this.#failure = err;
    this.#wake?.();
  }
  async accept(): Promise<FakeConn> {
    for (;;) {
      if (this.#failure) {
        const e = this.#failure;
        this.#failure = undefined;
        throw e;
      }
      if (this.#pending.length) return this.#pending.shift()!;
      if (this.closed) throw new Deno.errors.BadResource("closed");
      await new Promise<void>((r) => (this.#wake = r));
    }
  }
  #failure: Error | undefined;
}

/** NetOps over fakes: records binds, refuses the ports in `busy`, dials record their backend. */
export class FakeNet implements NetOps {
  readonly listeners = new Map<string, FakeListener>();
  readonly busy = new Set<number>();
  readonly dials: { backend: Backend; conn: FakeConn }[] = [];
  listen(host: string, port: number): FakeListener {
    if (this.busy.has(port)) {
      throw new Deno.errors.AddrInUse("Address already in use (os error 98)");
    }
    const l = new FakeListener(host, port);
    this.listeners.set(`${host}|${port}`, l);
    return l;
  }
  dial(backend: Backend): Promise<FakeConn> {
    const conn = new FakeConn();
    this.dials.push({ backend, conn });
    return Promise.resolve(conn);
  }
  /** The open listener on host:port, if any. */
  open(host: string, port: number): FakeListener | undefined {
    const l = this.listeners.get(`${host}|${port}`);
    return l && !l.closed ? l : undefined;
  }
}

/** Lets pending promise callbacks run. */
export async function settle(times = 20): Promise<void> {
  for (let i = 0; i < times; i++) await Promise.resolve();
}
