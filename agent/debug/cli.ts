/**
 * `kube-nft-proxy trace` and `kube-nft-proxy explain`: answers "why does
 * this packet go there?" on a node, from the live ruleset (read through
 * libnftables, never changed) or, with `--dry-run`, from what the agent
 * would program for a cluster (`--objects FILE`, or the API server of the
 * usual connection flags), with no kernel at all.
 *
 * @module
 */
import { openNftables } from "../../ffi/nftables/client.ts";
import type { NftablesClient } from "../../ffi/nftables/types.ts";
import { setLibraryDir } from "../../ffi/libpath.ts";
import { familyOfText, nftFamily } from "../../net/family.ts";
import { parseIP } from "../../net/ip.ts";
import { TABLE } from "../../proxier/nftables/names.ts";
import { explain, type ExplainEnv } from "../../proxier/nftables/trace/explain.ts";
import {
  clientReader,
  type RulesetReader,
  tableReader,
} from "../../proxier/nftables/trace/reader.ts";
import { explainText, traceText } from "../../proxier/nftables/trace/report.ts";
import { type Packet, trace } from "../../proxier/nftables/trace/tracer.ts";
import { parseArgs, UsageError } from "../flags.ts";
import { programDryRun } from "./cluster.ts";

const USAGE = `Usage:
  kube-nft-proxy trace --from IP[:PORT] --to IP:PORT/PROTO [--iif NAME] [--source pod|offnode|host]
                       [-o text|json] [--dry-run [--objects FILE]] [agent flags]
  kube-nft-proxy explain NAMESPACE/SERVICE [--pod-ip IP] [--outside-ip IP]
                       [-o text|json] [--dry-run [--objects FILE]] [agent flags]

Reads this node's kube-proxy table (read-only). With --dry-run, traces what the agent would
program instead: for the cluster in FILE (YAML documents or a JSON List of Services,
EndpointSlices, the Node and ServiceCIDRs), or for the cluster the usual connection flags
(--kubeconfig, --master) reach. Agent flags such as --hostname-override, --cluster-cidr,
--detect-local-mode and --nodeport-addresses shape the rules as they do for the agent.`;

/** Options of the debug commands themselves; the rest are agent flags. */
interface DebugOptions {
  command: "trace" | "explain";
  output: "text" | "json";
  service?: string;
  from?: string;
  to?: string;
  iif?: string;
  source?: Packet["from"];
  objects?: string;
  podIP?: string;
  outsideIP?: string;
  rest: string[];
}

function takeOptions(argv: string[]): DebugOptions {
  const [command, ...args] = argv;
  if (command !== "trace" && command !== "explain") throw new UsageError(USAGE);
  const o: DebugOptions = { command, output: "text", rest: [] };
  const value = (i: number, name: string) => {
    const v = args[i + 1];
    if (v === undefined) throw new UsageError(`${name} needs a value`);
    return v;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const eq = a.indexOf("=");
    const name = a.startsWith("--") && eq > 0 ? a.slice(0, eq) : a;
    const inline = a.startsWith("--") && eq > 0 ? a.slice(eq + 1) : undefined;
    const get = () => inline ?? value(i++, name);
    switch (name) {
      case "-o":
      case "--output": {
        const v = get();
        if (v !== "text" && v !== "json") throw new UsageError(`${name}: want text or json`);
        o.output = v;
        break;
      }
      case "--from":
        o.from = get();
        break;
      case "--to":
        o.to = get();
        break;
      case "--iif":
        o.iif = get();
        break;
      case "--source": {
        const v = get();
        if (v !== "pod" && v !== "offnode" && v !== "host") {
          throw new UsageError("--source: want pod, offnode or host");
        }
        o.source = v;
        break;
      }
      case "--objects":
        o.objects = get();
        break;
      case "--pod-ip":
        o.podIP = get();
        break;
      case "--outside-ip":
        o.outsideIP = get();
        break;
      case "-h":
      case "--help":
        throw new UsageError(USAGE);
      default:
        if (command === "explain" && !a.startsWith("-") && o.service === undefined) o.service = a;
        else o.rest.push(a);
    }
  }
  return o;
}

/** Parses `--to IP:PORT/PROTO` and `--from IP[:PORT]`. */
export function parseEndpoints(
  from: string,
  to: string,
): { src: string; dst: string; dport: number; proto: Packet["proto"] } {
  const m = /^(?:\[([^\]]+)\]|([^/]+)):(\d+)\/(tcp|udp|sctp)$/i.exec(to);
  if (m === null) {
    throw new UsageError(`--to ${JSON.stringify(to)}: want IP:PORT/PROTO, e.g. 10.96.0.10:53/udp`);
  }
  const dst = m[1] ?? m[2];
  const dport = Number(m[3]);
  if (!parseIP(dst) || dport < 1 || dport > 65535) {
    throw new UsageError(`--to ${JSON.stringify(to)}: bad address or port`);
  }
  const f = /^(?:\[([^\]]+)\](?::\d+)?|([^:]+)(?::\d+)?|([0-9a-f:]+))$/i.exec(from);
  const src = f?.[1] ?? f?.[2] ?? f?.[3];
  if (src === undefined || !parseIP(src)) {
    throw new UsageError(`--from ${JSON.stringify(from)}: want IP[:PORT]`);
  }
  if (src.includes(":") !== dst.includes(":")) {
    throw new UsageError("--from and --to are of different IP families");
  }
  return { src, dst, dport, proto: m[4].toLowerCase() as Packet["proto"] };
}

/** The node's own addresses, for routing and `fib ... type local`. */
function localAddresses(): string[] {
  try {
    return Deno.networkInterfaces().map((i) => i.address.replace(/%.*$/, ""));
  } catch {
    return [];
  }
}

/** A pod address guessed from the masquerade rule (`ip saddr != CIDR`), for explain. */
async function guessPodIP(reader: RulesetReader): Promise<string | undefined> {
  for (const r of (await reader.rules("services")) ?? []) {
    const m = /saddr != (\S+)\/\d+/.exec(r.rule);
    const ip = m && parseIP(m[1]);
    if (!ip) continue;
    const bytes = [...ip.bytes];
    bytes[bytes.length - 1] += 10;
    return ip.family === 4 ? bytes.join(".") : m![1].replace(/::$/, "::a").replace(/:0$/, ":a");
  }
  return undefined;
}

/** Runs `trace` or `explain`; resolves with the exit code. */
export async function runDebug(argv: string[]): Promise<number> {
  let o: DebugOptions;
  try {
    o = takeOptions(argv);
    const cfg = parseArgs(o.rest);
    if (cfg.libDir) setLibraryDir(cfg.libDir);
    const nodeName = (cfg.hostnameOverride ?? Deno.hostname()).trim().toLowerCase();
    let readers: Map<string, { reader: RulesetReader; nodeIPs: string[] }>;
    const clients: NftablesClient[] = [];
    if (cfg.dryRun) {
      const source = { objects: o.objects, kubeconfig: cfg.kubeconfig, master: cfg.master };
      readers = new Map();
      for (const t of await programDryRun(cfg, nodeName, source)) {
        readers.set(nftFamily(t.family), {
          reader: tableReader(t.table),
          nodeIPs: t.node.ips,
        });
      }
    } else {
      const local = localAddresses();
      readers = new Map();
      for (const fam of ["ip", "ip6"] as const) {
        const c = openNftables(fam, TABLE);
        clients.push(c);
        readers.set(fam, { reader: clientReader(c), nodeIPs: local });
      }
    }
    try {
      return o.command === "trace" ? await runTrace(o, readers) : await runExplain(o, readers);
    } finally {
      for (const c of clients) c.close();
    }
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(err.message === USAGE ? USAGE : `kube-nft-proxy: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    console.error(`kube-nft-proxy: ${(err as Error).message}`);
    return 1;
  }
}

async function runTrace(
  o: DebugOptions,
  readers: Map<string, { reader: RulesetReader; nodeIPs: string[] }>,
): Promise<number> {
  if (o.from === undefined || o.to === undefined) {
    throw new UsageError("trace needs --from and --to");
  }
  const ep = parseEndpoints(o.from, o.to);
  const r = readers.get(nftFamily(familyOfText(ep.dst)))!;
  const from = o.source ?? (r.nodeIPs.includes(ep.src) ? "host" : o.iif ? "pod" : "offnode");
  const pkt: Packet = { ...ep, from, ...(o.iif ? { iif: o.iif } : {}) };
  const res = await trace(r.reader, pkt, { nodeIPs: r.nodeIPs });
  console.log(
    o.output === "json" ? JSON.stringify({ packet: pkt, ...res }, null, 2) : traceText(pkt, res),
  );
  return 0;
}

async function runExplain(
  o: DebugOptions,
  readers: Map<string, { reader: RulesetReader; nodeIPs: string[] }>,
): Promise<number> {
  if (o.service === undefined) throw new UsageError("explain needs NAMESPACE/SERVICE");
  const out = [];
  for (const [, r] of readers) {
    const env: ExplainEnv = {
      nodeIPs: r.nodeIPs,
      podIP: o.podIP ?? await guessPodIP(r.reader),
      outsideIP: o.outsideIP ?? (r.reader.family === "ip6" ? "2001:db8:ffff:ffff::1" : "192.0.2.1"),
    };
    const e = await explain(r.reader, o.service, env);
    if (e.ports.length > 0 || out.length === 0) out.push(e);
  }
  const found = out.filter((e) => e.ports.length > 0);
  const shown = found.length > 0 ? found : out.slice(0, 1);
  console.log(
    o.output === "json" ? JSON.stringify(shown, null, 2) : shown.map(explainText).join("\n\n"),
  );
  return found.length > 0 ? 0 : 3;
}
