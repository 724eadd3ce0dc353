/**
 * Tells when the `--config` file's content changes, so the agent can exit and be restarted with
 * it, as upstream kube-proxy does ("content of the proxy server's configuration file was
 * updated"); the rules stay in place and the next start adopts them.
 *
 * A ConfigMap volume updates by swapping the `..data` symlink next to the file, and editors
 * replace files by rename, so the file's directory is watched, not the file. Every event (and a
 * slow poll, for file systems that send none) leads to a re-read; only changed content counts:
 * a touch, a chmod, or a swap to identical content does not restart anything. While the file
 * cannot be read (mid-swap, deleted), the agent keeps running.
 *
 * @module
 */
/** Options of {@link watchConfigFile}. */
export interface ConfigWatchOptions {
  /** The content the running configuration was read from. */
  initial: string;
  /** Called once, when the content on disk differs from `initial`. */
  onChange: () => void;
  /** Re-read interval without events. Default 10 s. */
  pollMs?: number;
  /** Delay after an event before re-reading, so a burst of events reads once. Default 100 ms. */
  settleMs?: number;
  /** Reads the file; default Deno.readTextFile. */
  read?: (path: string) => Promise<string>;
}

/** A running watch; stop it with close(). */
export interface ConfigWatch {
  /** Stops watching. */
  close(): void;
}

function dirname(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "." : i === 0 ? "/" : path.slice(0, i);
}

/** Watches `path`; see the module doc. */
export function watchConfigFile(path: string, opts: ConfigWatchOptions): ConfigWatch {
  const read = opts.read ?? Deno.readTextFile;
  let closed = false, fired = false;
  let pending: ReturnType<typeof setTimeout> | undefined;
  let watcher: Deno.FsWatcher | undefined;
  const check = async () => {
    pending = undefined;
    if (closed || fired) return;
    let now: string;
    try {
      now = await read(path);
    } catch {
      return; // mid-swap or gone: keep what is running
    }
    if (now !== opts.initial && !closed && !fired) {
      fired = true;
      opts.onChange();
    }
  };
  const soon = () => {
    if (pending === undefined) pending = setTimeout(check, opts.settleMs ?? 100);
  };
  try {
    watcher = Deno.watchFs(dirname(path), { recursive: false });
    (async () => {
      try {
        for await (const _ of watcher!) soon();
      } catch { /* closed */ }
    })();
  } catch {
    // No inotify here (or no permission on the directory): the poll alone notices changes.
  }
  const poll = setInterval(check, opts.pollMs ?? 10_000);
  return {
    close() {
      closed = true;
      clearInterval(poll);
      if (pending !== undefined) clearTimeout(pending);
      try {
        watcher?.close();
      } catch { /* already closed */ }
    },
  };
}
