/**
 * The benchmark's client, run in the client namespace: it times real TCP connections to
 * Service addresses. Commands arrive as JSON lines on stdin, answers leave as JSON lines on
 * stdout carrying the command's id. Times are wall-clock milliseconds
 * (`performance.timeOrigin + performance.now()`), comparable across processes on one machine.
 *
 * - `{id, op: "all", targets: ["ip:port", ...], timeoutMs}`: probes until every target has
 *   answered once; answers `{id, t}` with the time the last one answered.
 * - `{id, op: "expect", target, reply, timeoutMs}`: probes one target until a connection is
 *   answered by `reply` (the backend answers with the endpoint address it was reached on);
 *   answers `{id, t, attempts}`.
 * - `{id, op: "watch", targets}`: probes the targets round-robin in the background, every
 *   connection must succeed; `{id, op: "unwatch"}` answers `{id, probes, failures, examples}`.
 *
 * @module
 */

/** Wall-clock time, ms, with sub-millisecond resolution. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

type Reply = { ok: true; text: string } | { ok: false; error: string };

/** One fresh connection to `target` ("ip:port"): what the server answered, or why not. */
async function attempt(target: string, timeoutMs: number): Promise<Reply> {
  const i = target.lastIndexOf(":");
  const hostname = target.slice(0, i), port = Number(target.slice(i + 1));
  // Aborting closes the socket: a SYN that was dropped leaves nothing behind.
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    const conn = await Deno.connect({ hostname, port, signal: abort.signal });
    try {
      return { ok: true, text: (await new Response(conn.readable).text()).trim() };
    } catch (e) {
      try {
        conn.close();
      } catch { /* gone */ }
      return { ok: false, error: abort.signal.aborted ? "timeout" : (e as Error).message };
    }
  } catch (e) {
    return { ok: false, error: abort.signal.aborted ? "timeout" : (e as Error).name };
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How often `all` opens a connection: its load stays ~500 a second, whatever the targets. */
const ALL_PERIOD_MS = 2;

/**
 * Probes until every target has answered once; the answer time is the last first answer, timed
 * when it arrived. One connection every {@link ALL_PERIOD_MS}, round robin over the targets that
 * have not answered, none waiting for another (a SYN dropped because the rules do not translate
 * that ClusterIP yet would hold it until its timeout). Rules arrive by transactions, so one
 * answer sends a connection to every target still waiting at once: when the last transaction
 * lands, the reading is late by about a period, not by a round of all targets or a timeout.
 */
function all(targets: string[], timeoutMs: number): Promise<Record<string, unknown>> {
  const deadline = now() + timeoutMs;
  const pending = new Set(targets);
  let attempts = 0, turn = 0, last = 0, sweptAt = 0;
  return new Promise((resolve) => {
    const finish = (answer: Record<string, unknown>) => {
      clearInterval(timer);
      resolve(answer);
    };
    const probe = (target: string) => {
      attempts++;
      attempt(target, 300).then((r) => {
        if (!r.ok || !pending.delete(target)) return;
        last = now();
        if (pending.size === 0) return finish({ t: last, attempts });
        if (last - sweptAt < 10) return;
        sweptAt = last;
        for (const t of pending) probe(t);
      });
    };
    const timer = setInterval(() => {
      if (pending.size === 0) return;
      if (now() > deadline) return finish({ error: `${pending.size} targets never answered` });
      const waiting = [...pending];
      probe(waiting[turn++ % waiting.length]);
    }, ALL_PERIOD_MS);
  });
}

/**
 * A new connection every 2 ms, without waiting for earlier ones: a SYN the old rules dropped
 * would otherwise hold the measurement until its timeout.
 */
function expect(
  target: string,
  reply: string,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  const deadline = now() + timeoutMs;
  let attempts = 0, inFlight = 0;
  let last: Reply | undefined;
  return new Promise((resolve) => {
    let done = false;
    const tick = () => {
      if (done) return;
      if (now() > deadline) {
        done = true;
        resolve({
          error: `no reply from ${reply} within ${timeoutMs} ms (last: ${JSON.stringify(last)})`,
        });
        return;
      }
      if (inFlight < 100) {
        attempts++;
        inFlight++;
        attempt(target, 300).then((r) => {
          inFlight--;
          last = r;
          if (!done && r.ok && r.text === reply) {
            done = true;
            resolve({ t: now(), attempts });
          }
        });
      }
      setTimeout(tick, 2);
    };
    tick();
  });
}

let watching: { stop: boolean; probes: number; failures: number; examples: string[] } | undefined;
let watchDone: Promise<void> | undefined;

function watch(targets: string[]): void {
  const w = { stop: false, probes: 0, failures: 0, examples: [] as string[] };
  watching = w;
  watchDone = (async () => {
    for (let k = 0; !w.stop; k++) {
      const t = targets[k % targets.length];
      const r = await attempt(t, 1000);
      w.probes++;
      if (!r.ok) {
        w.failures++;
        if (w.examples.length < 5) w.examples.push(`${t}: ${r.error}`);
      }
      await sleep(10);
    }
  })();
}

async function handle(cmd: Record<string, unknown>): Promise<Record<string, unknown>> {
  switch (cmd.op) {
    case "all":
      return await all(cmd.targets as string[], Number(cmd.timeoutMs ?? 60_000));
    case "expect":
      return await expect(String(cmd.target), String(cmd.reply), Number(cmd.timeoutMs ?? 30_000));
    case "watch":
      watch(cmd.targets as string[]);
      return {};
    case "unwatch": {
      const w = watching;
      if (!w) return { error: "not watching" };
      w.stop = true;
      await watchDone;
      watching = undefined;
      return { probes: w.probes, failures: w.failures, examples: w.examples };
    }
    default:
      return { error: `unknown op ${cmd.op}` };
  }
}

if (import.meta.main) {
  const enc = new TextEncoder();
  const out = (o: Record<string, unknown>) =>
    Deno.stdout.writeSync(enc.encode(JSON.stringify(o) + "\n"));
  out({ ready: true });
  let buf = "";
  for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      const cmd = JSON.parse(line);
      // Commands run concurrently: a watch goes on while expects are timed.
      handle(cmd).then(
        (r) => out({ id: cmd.id, ...r }),
        (e) => out({ id: cmd.id, error: String(e) }),
      );
    }
  }
}
