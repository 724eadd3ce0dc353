/**
 * The kernel's commits as the bench sees them: a commit stamper process
 * (commit_stamper.ts) in the node namespace prints each commit when its
 * NEWGEN arrives, and {@link CommitLog} collects them for the timed phases.
 *
 * @module
 */
import { lines } from "../../support/lines.ts";
import { now } from "../../support/prober.ts";
import type { Commit } from "./kernel_commits.ts";
import { sleep } from "./measure.ts";

/** The commits as they arrive, from the stamper process (commit_stamper.ts). */
export class CommitLog {
  readonly commits: Commit[] = [];
  overruns = 0;
  readonly #child: Deno.ChildProcess;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #reading: Promise<void>;

  private constructor(ready: () => void) {
    const script = new URL("./commit_stamper.ts", import.meta.url).pathname;
    this.#child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-config", script],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#stdin = this.#child.stdin.getWriter();
    this.#reading = this.#read(ready);
  }

  /** Starts the stamper and waits until it is subscribed. */
  static async open(): Promise<CommitLog> {
    let ready!: () => void;
    const subscribed = new Promise<void>((r) => ready = r);
    const log = new CommitLog(ready);
    const failed = log.#reading.then(() => {
      throw new Error("the commit stamper exited before it subscribed");
    });
    await Promise.race([subscribed, failed]);
    return log;
  }

  async #read(ready: () => void): Promise<void> {
    for await (const text of lines(this.#child.stdout)) {
      const line = JSON.parse(text);
      if (line.ready) ready();
      else if (line.overrun) this.overruns++;
      else this.commits.push(line as Commit);
    }
  }

  /** Waits for a commit from index `from` on that `pred` accepts; resolves with it. */
  async waitFor(from: number, pred: (c: Commit) => boolean, timeoutMs: number): Promise<Commit> {
    const deadline = now() + timeoutMs;
    for (let k = from;; await sleep(5)) {
      for (; k < this.commits.length; k++) if (pred(this.commits[k])) return this.commits[k];
      if (now() > deadline) throw new Error(`no such commit within ${timeoutMs} ms`);
    }
  }

  /** Waits until no commit has arrived for `quietMs` (at most `timeoutMs`). */
  async quiet(quietMs: number, timeoutMs: number): Promise<void> {
    const deadline = now() + timeoutMs;
    while (now() < deadline) {
      const last = this.commits.at(-1)?.t ?? 0;
      if (now() - last >= quietMs) return;
      await sleep(Math.max(5, quietMs - (now() - last)));
    }
  }

  async stop(): Promise<void> {
    await this.#stdin.close().catch(() => {});
    await this.#reading.catch(() => {});
    await this.#child.status;
  }
}
