/**
 * Network namespaces for real-kernel tests. Every test makes its own
 * namespaces (prefixed with the process id so parallel runs do not collide),
 * runs code inside them through `ip netns exec`, and deletes them after.
 * Only 198.18.0.0/15 and 2001:db8::/32 are used inside.
 *
 * @module
 */

/** Output of a finished command. */
export interface CmdResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Why real-kernel tests cannot run here, or undefined when they can. */
export function realKernelUnavailable(): string | undefined {
  if (Deno.uid() !== 0) return "real-kernel tests need root (they create network namespaces)";
  try {
    Deno.statSync("/usr/sbin/ip");
  } catch {
    try {
      Deno.statSync("/sbin/ip");
    } catch {
      return "real-kernel tests need iproute2 (`ip`)";
    }
  }
  return undefined;
}

/**
 * Registers a real-kernel test. Where the kernel cannot be used it is
 * registered as ignored and the reason is printed, so it never passes
 * silently; with KNP_REQUIRE_E2E=1 (CI) it fails instead.
 */
export function e2eTest(
  name: string,
  fn: (t: Deno.TestContext) => void | Promise<void>,
): void {
  const why = realKernelUnavailable();
  if (why !== undefined && Deno.env.get("KNP_REQUIRE_E2E") === "1") {
    Deno.test(name, () => {
      throw new Error(`cannot run: ${why}`);
    });
    return;
  }
  if (why !== undefined) console.error(`SKIP ${name}: ${why}`);
  Deno.test({ name, ignore: why !== undefined, sanitizeResources: false, sanitizeOps: false, fn });
}

/** Runs a command to completion. */
export async function run(
  cmd: string[],
  opts: { stdin?: string; check?: boolean } = {},
): Promise<CmdResult> {
  const p = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    stdin: opts.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(opts.stdin));
    await w.close();
  }
  const out = await p.output();
  const res = {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
  if (opts.check !== false && res.code !== 0) {
    throw new Error(`${cmd.join(" ")} exited ${res.code}: ${res.stderr.trim()}`);
  }
  return res;
}

let counter = 0;

/** A network namespace owned by a test. */
export class Netns {
  private constructor(readonly name: string) {}

  /** Creates a namespace with loopback up. */
  static async create(tag = "t"): Promise<Netns> {
    const name = `knp${Deno.pid}-${tag}${counter++}`;
    await run(["ip", "netns", "add", name]);
    const ns = new Netns(name);
    await ns.exec(["ip", "link", "set", "lo", "up"]);
    return ns;
  }

  /** Runs a command inside the namespace. Throws on failure unless `check: false`. */
  exec(cmd: string[], opts: { stdin?: string; check?: boolean } = {}): Promise<CmdResult> {
    return run(["ip", "netns", "exec", this.name, ...cmd], opts);
  }

  /** Starts a long-running command inside the namespace. */
  spawn(
    cmd: string[],
    opts: { stdout?: "piped" | "null" | "inherit"; stderr?: "piped" | "null" | "inherit" } = {},
  ): Deno.ChildProcess {
    return new Deno.Command("ip", {
      args: ["netns", "exec", this.name, ...cmd],
      stdin: "null",
      stdout: opts.stdout ?? "piped",
      stderr: opts.stderr ?? "piped",
    }).spawn();
  }

  /** Deletes the namespace (idempotent). */
  async delete(): Promise<void> {
    await run(["ip", "netns", "delete", this.name], { check: false });
  }
}

/** Runs `fn` with fresh namespaces, deleting them afterwards whatever happens. */
export async function withNetns<T>(count: number, fn: (...ns: Netns[]) => Promise<T>): Promise<T> {
  const made: Netns[] = [];
  try {
    for (let i = 0; i < count; i++) made.push(await Netns.create());
    return await fn(...made);
  } finally {
    for (const ns of made) await ns.delete();
  }
}

/** Connects two namespaces with a veth pair: `a` gets `ifA`, `b` gets `ifB`, both up. */
export async function link(a: Netns, ifA: string, b: Netns, ifB: string): Promise<void> {
  const tmp = `v${Deno.pid % 10000}x${counter++}`;
  await run([
    "ip",
    "link",
    "add",
    tmp,
    "netns",
    a.name,
    "type",
    "veth",
    "peer",
    "name",
    ifB,
    "netns",
    b.name,
  ]);
  await a.exec(["ip", "link", "set", tmp, "name", ifA]);
  await a.exec(["ip", "link", "set", ifA, "up"]);
  await b.exec(["ip", "link", "set", ifB, "up"]);
}

/** Absolute path of the repo's Deno (the one running this test). */
export const denoBin: string = Deno.execPath();

/** Repo root (directory of deno.json). */
export const repoRoot: string = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
