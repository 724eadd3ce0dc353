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
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<Reply>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, error: "timeout" }), timeoutMs);
  });
  const work = (async (): Promise<Reply> => {
    try {
      const conn = await Deno.connect({ hostname, port });
      try {
        return { ok: true, text: (await new Response(conn.readable).text()).trim() };
      } catch (e) {
        try {
          conn.close();
        } catch { /* gone */ }
        return { ok: false, error: (e as Error).message };
      }
    } catch (e) {
      return { ok: false, error: (e as Error).name };
    }
  })();
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function all(targets: string[], timeoutMs: number): Promise<Record<string, unknown>> {
  const pending = new Set(targets);
  const deadline = now() + timeoutMs;
  let attempts = 0;
  let last = 0;
  while (pending.size > 0) {
    if (now() > deadline) return { error: `${pending.size} targets never answered` };
    const batch = [...pending].slice(0, 64);
    const rs = await Promise.all(batch.map((t) => attempt(t, 300)));
    attempts += batch.length;
    rs.forEach((r, k) => {
      if (r.ok) {
        pending.delete(batch[k]);
        last = now();
      }
    });
    if (pending.size > 0 && rs.every((r) => !r.ok)) await sleep(2);
  }
  return { t: last, attempts };
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
