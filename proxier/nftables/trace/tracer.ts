/**
 * The packet tracer: follows the first packet of a new connection through
 * the kube-proxy table the way the kernel would (hooks in kernel order, base
 * chains by priority, jumps, gotos, verdict maps, `numgen` and map-based
 * DNAT) and says what happens to it, with every step on the way.
 *
 * `numgen random` forks the trace: each possible path is a branch with its
 * probability, so a DNAT reports every candidate endpoint and its share.
 * The tracer interprets exactly the rule vocabulary kube-nft-proxy writes,
 * in the forms nft lists it back, and throws on anything else, so a rule it
 * does not understand is never silently skipped. Only our own table is
 * traced: other tables on the node may act on the packet too.
 *
 * @module
 */
import { ruleWords } from "../../../ffi/nftables/tokens.ts";
import type { Chain, Element, Hook, Rule } from "../../../ffi/nftables/types.ts";
import { cidrContains, parseCIDR } from "../../../net/cidr.ts";
import { nftFamily } from "../../../net/family.ts";
import { canonicalIP, parseIP } from "../../../net/ip.ts";
import type { RulesetReader } from "./reader.ts";

/** The first packet of a connection. */
export interface Packet {
  src: string;
  dst: string;
  proto: "tcp" | "udp" | "sctp";
  dport: number;
  /** Where it comes from: another machine, a pod on this node, or this node's own stack. */
  from: "offnode" | "pod" | "host";
  /** Input interface name (for iifname matches); "" for host traffic. */
  iif?: string;
}

/** Facts about the node that `fib` and routing need. */
export interface TraceEnv {
  /** Addresses local to the node (for `fib ... type local` and routing). */
  nodeIPs: string[];
}

/** One thing that happened to the packet. */
export interface Step {
  hook: string;
  chain: string;
  /** The rule that matched (nft syntax). */
  rule?: string;
  /** The set or map element it hit: `name: key : value`. */
  element?: string;
}

/** Final verdicts. */
export type Verdict = "ACCEPT" | "DROP" | "REJECT";

/** One possible path of the packet. */
export interface Branch {
  verdict: Verdict;
  /** `ip:port` (IPv6 `[ip]:port`) when DNATed. */
  dnat?: string;
  masquerade: boolean;
  /** Hook that decided a DROP/REJECT, or the last hook traversed. */
  hook: string;
  /** Share of new connections taking this path. */
  probability: number;
  /** Why the packet ends this way, in words. */
  reason: string;
  steps: Step[];
}

/** What happens to the packet, merged over all possible paths. */
export interface TraceResult {
  verdict: Verdict;
  /** Every possible DNAT target, sorted. */
  dnat: string[];
  /** Each DNAT target with the share of connections it gets and whether they are masqueraded. */
  candidates: { dnat: string; probability: number; masquerade: boolean }[];
  /** True when some path masquerades. */
  masquerade: boolean;
  /** The reason of the most likely path. */
  reason: string;
  branches: Branch[];
}

interface Pkt {
  saddr: string;
  daddr: string;
  proto: string;
  dport: number;
  mark: number;
  iif: string;
  dnat?: string;
  masq: boolean;
  p: number;
  steps: Step[];
  /** The rule or element that decided a DROP/REJECT (for the reason). */
  cause?: Step;
}

type Outcome = "next" | "return" | "accept" | "drop" | "reject";
interface Res {
  pkt: Pkt;
  v: Outcome;
}

function fork(p: Pkt, step?: Step, share = 1): Pkt {
  return { ...p, p: p.p * share, steps: step ? [...p.steps, step] : [...p.steps] };
}

function canon(s: string): string {
  return canonicalIP(s) ?? s;
}

const HOOK_ORDER: Record<Packet["from"], Hook[]> = {
  offnode: ["prerouting"],
  pod: ["prerouting"],
  host: ["output"],
};

/** Traces the first packet of a connection through the ruleset `reader` reads. */
export function trace(reader: RulesetReader, pkt: Packet, env: TraceEnv): Promise<TraceResult> {
  return new Tracer(reader, env).run(pkt);
}

/** Why a branch ends as it does. */
function reasonOf(b: Omit<Branch, "reason">, cause: Step | undefined): string {
  if (b.verdict === "ACCEPT") {
    if (b.dnat !== undefined) return `DNAT to endpoint ${b.dnat}`;
    return "not translated: no Service frontend on this node matches";
  }
  if (b.steps.some((s) => s.element?.startsWith("no-endpoint-"))) {
    return b.verdict === "REJECT"
      ? "the Service has no endpoints"
      : "no endpoint this traffic may use (traffic policy Local, none on this node)";
  }
  if (cause?.chain === "cluster-ips-check") {
    return cause.rule?.includes("@cluster-ips")
      ? "the ClusterIP has no such port and protocol"
      : "unallocated ClusterIP (in a ServiceCIDR, but no Service has it)";
  }
  if (cause?.chain.startsWith("firewall-")) return "source not in loadBalancerSourceRanges";
  return `${b.verdict} in chain ${cause?.chain ?? "?"}`;
}

class Tracer {
  private readonly local: Set<string>;
  private bases: Promise<Chain[]> | undefined;

  constructor(private readonly reader: RulesetReader, env: TraceEnv) {
    this.local = new Set(env.nodeIPs.map(canon));
  }

  async run(p: Packet): Promise<TraceResult> {
    for (const a of [p.src, p.dst]) {
      if (!parseIP(a)) throw new Error(`packet address ${JSON.stringify(a)} is not an IP`);
    }
    const start: Pkt = {
      saddr: canon(p.src),
      daddr: canon(p.dst),
      proto: p.proto,
      dport: p.dport,
      mark: 0,
      iif: p.iif ?? (p.from === "host" ? "" : p.from === "pod" ? "veth-pod" : "eth0"),
      masq: false,
      p: 1,
      steps: [],
    };
    const branches: Branch[] = [];
    for (const [pkt, hook, verdict] of await this.walk(start, p.from)) {
      const b = {
        verdict,
        masquerade: pkt.masq,
        hook,
        probability: pkt.p,
        steps: pkt.steps,
        ...(pkt.dnat === undefined ? {} : { dnat: pkt.dnat }),
      };
      branches.push({ ...b, reason: reasonOf(b, pkt.cause) });
    }
    const verdicts = new Set(branches.map((b) => b.verdict));
    if (verdicts.size !== 1) {
      throw new Error(`trace paths disagree: ${JSON.stringify(branches.map((b) => b.verdict))}`);
    }
    const byTarget = new Map<string, { dnat: string; probability: number; masquerade: boolean }>();
    for (const b of branches) {
      if (b.dnat === undefined) continue;
      const c = byTarget.get(b.dnat) ?? { dnat: b.dnat, probability: 0, masquerade: false };
      c.probability += b.probability;
      c.masquerade ||= b.masquerade;
      byTarget.set(b.dnat, c);
    }
    const top = [...branches].sort((a, b) => b.probability - a.probability)[0];
    return {
      verdict: branches[0].verdict,
      dnat: [...byTarget.keys()].sort(),
      candidates: [...byTarget.values()].sort((a, b) => (a.dnat < b.dnat ? -1 : 1)),
      masquerade: branches.some((b) => b.masquerade),
      reason: top.reason,
      branches,
    };
  }

  /** Walks the hooks in kernel order, forking where rules fork. */
  private async walk(start: Pkt, from: Packet["from"]): Promise<[Pkt, string, Verdict][]> {
    let live: Pkt[] = [start];
    const done: [Pkt, string, Verdict][] = [];
    const pass = async (hook: Hook, pkts: Pkt[]): Promise<Pkt[]> => {
      const next: Pkt[] = [];
      for (const p of pkts) {
        for (const r of await this.runHook(hook, p)) {
          if (r.v === "drop" || r.v === "reject") {
            done.push([r.pkt, hook, r.v === "drop" ? "DROP" : "REJECT"]);
          } else next.push(r.pkt);
        }
      }
      return next;
    };
    for (const h of HOOK_ORDER[from]) live = await pass(h, live);
    for (const p of live) {
      const toLocal = this.isLocal(p.daddr);
      let ps = [p];
      if (from === "host") {
        ps = await pass("postrouting", ps);
        if (toLocal) ps = await pass("input", ps);
        for (const q of ps) done.push([q, toLocal ? "input" : "postrouting", "ACCEPT"]);
      } else if (toLocal) {
        ps = await pass("input", ps);
        for (const q of ps) done.push([q, "input", "ACCEPT"]);
      } else {
        ps = await pass("forward", ps);
        ps = await pass("postrouting", ps);
        for (const q of ps) done.push([q, "postrouting", "ACCEPT"]);
      }
    }
    return done;
  }

  private isLocal(addr: string): boolean {
    const p = parseIP(addr);
    if (p && p.family === 4 && p.bytes[0] === 127) return true;
    if (addr === "::1") return true;
    return this.local.has(addr);
  }

  /** Runs every base chain of a hook in priority order. */
  private async runHook(hook: Hook, pkt: Pkt): Promise<Res[]> {
    this.bases ??= this.reader.baseChains();
    const chains = (await this.bases).filter((c) => c.hook === hook)
      .sort((a, b) => (a.priority ?? 0) - (b.priority ?? 0));
    let live: Res[] = [{ pkt, v: "accept" }];
    for (const c of chains) {
      const next: Res[] = [];
      for (const r of live) {
        if (r.v === "drop" || r.v === "reject") {
          next.push(r);
          continue;
        }
        for (const o of await this.runChain(c.name, r.pkt, 0, hook)) {
          next.push({ pkt: o.pkt, v: o.v === "drop" || o.v === "reject" ? o.v : "accept" });
        }
      }
      live = next;
    }
    return live;
  }

  private async runChain(name: string, pkt: Pkt, depth: number, hook: string): Promise<Res[]> {
    if (depth > 16) throw new Error(`chain recursion too deep at ${name}`);
    const rules = await this.reader.rules(name);
    if (!rules) throw new Error(`jump to missing chain ${name}`);
    return this.runFrom(rules, 0, pkt, depth, { hook, chain: name });
  }

  /** Runs rules[i..]; "return" means fell off the end or hit `return`. */
  private async runFrom(
    rules: Rule[],
    i: number,
    pkt: Pkt,
    depth: number,
    at: Step,
  ): Promise<Res[]> {
    if (i >= rules.length) return [{ pkt, v: "return" }];
    const out: Res[] = [];
    for (const r of await this.runRule(rules[i].rule, pkt, depth, at)) {
      if (r.v === "next") out.push(...await this.runFrom(rules, i + 1, r.pkt, depth, at));
      else out.push(r);
    }
    return out;
  }

  private async element(name: string, key: string[]): Promise<Element | undefined> {
    return await this.reader.element(name, key.map(canon));
  }

  /** Applies a verdict word to the rest of the trace. */
  private async verdict(
    word: string,
    target: string | undefined,
    pkt: Pkt,
    depth: number,
    at: Step,
  ): Promise<Res[]> {
    switch (word) {
      case "accept":
      case "return":
        return [{ pkt, v: word }];
      case "drop":
      case "reject":
        return [{ pkt: { ...pkt, cause: pkt.cause ?? at }, v: word }];
      case "jump":
        return (await this.runChain(target!, pkt, depth + 1, at.hook)).map((r) =>
          r.v === "return" ? { pkt: r.pkt, v: "next" } : r
        );
      case "goto":
        // A goto's chain returning ends the calling chain too.
        return await this.runChain(target!, pkt, depth + 1, at.hook);
    }
    throw new Error(`unknown verdict ${word}`);
  }

  /** Evaluates one rule; returns every possible result (numgen forks). */
  private runRule(rule: string, pkt0: Pkt, depth: number, at: Step): Promise<Res[]> {
    const t = ruleWords(rule);
    const fail = (why: string): never => {
      throw new Error(`tracer: cannot interpret ${why} in rule: ${rule}`);
    };
    const here: Step = { ...at, rule };
    const go = async (i: number, pkt: Pkt): Promise<Res[]> => {
      if (i >= t.length) return [{ pkt, v: "next" }];
      const w = t[i];
      const miss: Res[] = [{ pkt, v: "next" }];
      if (w === "accept" || w === "drop" || w === "reject" || w === "return") {
        if (i !== t.length - 1) fail(`tokens after ${w}`);
        return this.verdict(w, undefined, fork(pkt, here), depth, here);
      }
      if (w === "jump" || w === "goto") {
        if (i !== t.length - 2) fail(`tokens after ${w}`);
        return this.verdict(w, t[i + 1], fork(pkt, here), depth, here);
      }
      if (w === "ct" && t[i + 1] === "state" && t[i + 2] === "new") return go(i + 3, pkt);
      if (w === "ct" && t[i + 1] === "status" && t[i + 2] === "dnat") {
        return pkt.dnat !== undefined ? go(i + 3, pkt) : miss;
      }
      if (w === "fib" && t[i + 2] === "type" && t[i + 3] === "local") {
        const a = t[i + 1] === "daddr" ? pkt.daddr : t[i + 1] === "saddr" ? pkt.saddr : fail("fib");
        return this.isLocal(a) ? go(i + 4, pkt) : miss;
      }
      if (w === "numgen") {
        if (t[i + 1] !== "random" || t[i + 2] !== "mod") fail("numgen");
        const mod = Number(t[i + 3]), val = Number(t[i + 4]);
        if (!(mod > 0) || !Number.isInteger(val) || val >= mod) fail("numgen values");
        // Either outcome is possible: trace both, each with its share.
        return [
          ...(mod > 1 ? [{ pkt: fork(pkt, undefined, (mod - 1) / mod), v: "next" as const }] : []),
          ...await go(i + 5, fork(pkt, undefined, 1 / mod)),
        ];
      }
      if (w === "meta" && t[i + 1] === "mark" && t[i + 2] === "set") {
        if (t[i + 3] !== "meta" || t[i + 4] !== "mark") fail("mark set");
        const op = t[i + 5], v = Number(t[i + 6]);
        if (!Number.isFinite(v)) fail("mark value");
        const p = fork(pkt, here);
        if (op === "or" || op === "|") p.mark = (p.mark | v) >>> 0;
        else if (op === "xor" || op === "^") p.mark = (p.mark ^ v) >>> 0;
        else fail(`mark operator ${op}`);
        return go(i + 7, p);
      }
      if (w === "update") {
        const set = t[i + 1];
        if (!set?.startsWith("@") || !/^\{ ip6? saddr \}$/.test(t[i + 2] ?? "")) fail("update");
        return go(i + 3, pkt);
      }
      if (w === "dnat") {
        let j = i + 1;
        if (t[j] === "ip" || t[j] === "ip6") j++;
        if (t[j] === "to" && t[t.length - 2] === "map") {
          return this.dnatMap(t, j + 1, pkt, fail, here);
        }
        if (t[j] !== "to" || j + 2 !== t.length) fail("dnat");
        const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(t[j + 1]) ?? fail("dnat target");
        const p = fork(pkt, here);
        p.daddr = canon(m[1] ?? m[2]);
        p.dport = Number(m[3]);
        p.dnat = t[j + 1];
        return [{ pkt: p, v: "accept" }];
      }
      if (w === "masquerade") {
        if (!(i === t.length - 1 || (i === t.length - 2 && t[i + 1] === "fully-random"))) {
          fail("masquerade options");
        }
        const p = fork(pkt, here);
        p.masq = true;
        return [{ pkt: p, v: "accept" }];
      }
      // Selector expressions: sel (. sel)* then a relation, set lookup or vmap.
      const values: string[] = [];
      let j = i;
      for (;;) {
        const [v, n] = this.selector(t, j, pkt, fail);
        values.push(v);
        j = n;
        if (t[j] !== ".") break;
        j++;
      }
      if (t[j] === "vmap") {
        const ref = t[j + 1];
        if (!ref?.startsWith("@") || j + 2 !== t.length) fail("vmap");
        const e = await this.element(ref.slice(1), values);
        if (!e) return miss;
        const [word, target] = (e.value ?? []).join(" ").split(" ");
        const step = { ...here, element: describe(ref.slice(1), e) };
        return this.verdict(word, target, fork(pkt, step), depth, step);
      }
      let neg = false;
      if (t[j] === "!=") {
        neg = true;
        j++;
      } else if (t[j] === "==") j++;
      const rhs = t[j] ?? fail("missing value");
      let hit: boolean;
      if (rhs.startsWith("@")) {
        hit = (await this.element(rhs.slice(1), values)) !== undefined;
      } else {
        if (values.length !== 1) fail("concatenation compared to a literal");
        hit = matchLiteral(values[0], rhs, fail);
      }
      return hit !== neg ? go(j + 1, pkt) : miss;
    };
    return go(0, pkt0);
  }

  /**
   * `dnat to <key> map @m`: the key is a concatenation of selectors, one of
   * which may be `numgen random mod N`, which forks the trace over every
   * bucket. A bucket without an element is a lookup miss: the rule does not
   * match and the packet goes on un-NATed.
   */
  private async dnatMap(
    t: string[],
    from: number,
    pkt: Pkt,
    fail: (why: string) => never,
    here: Step,
  ): Promise<Res[]> {
    const ref = t[t.length - 1];
    if (!ref.startsWith("@")) fail("dnat map reference");
    const parts: string[][] = [[]];
    for (const tok of t.slice(from, t.length - 2)) {
      if (tok === ".") parts.push([]);
      else parts[parts.length - 1].push(tok);
    }
    let fork_: number | undefined;
    const fixed = parts.map((p) => {
      if (p[0] === "numgen") {
        if (p[1] !== "random" || p[2] !== "mod" || p.length !== 4) fail("numgen in a map key");
        fork_ = Number(p[3]);
        return undefined;
      }
      // nft lists a map key's `th dport` as `tcp dport` when the map's data
      // is typed that way: the same transport-header load.
      if (p.length === 2 && p[1] === "dport" && /^(tcp|udp|sctp)$/.test(p[0])) {
        return String(pkt.dport);
      }
      const [v, n] = this.selector(p, 0, pkt, fail);
      if (n !== p.length) fail(`map key part "${p.join(" ")}"`);
      return v;
    });
    const n = fork_ ?? 1;
    const out: Res[] = [];
    for (let b = 0; b < n; b++) {
      const key = fixed.map((v) => v ?? String(b));
      const e = await this.element(ref.slice(1), key);
      if (e === undefined || e.value === undefined) {
        out.push({ pkt: fork(pkt, undefined, 1 / n), v: "next" });
        continue;
      }
      const [addr, port] = e.value.join(" . ").split(" . ");
      const p = fork(pkt, { ...here, element: describe(ref.slice(1), e) }, 1 / n);
      p.daddr = canon(addr);
      p.dport = Number(port);
      p.dnat = addr.includes(":") ? `[${canon(addr)}]:${port}` : `${addr}:${port}`;
      out.push({ pkt: p, v: "accept" });
    }
    return out;
  }

  /** Reads one selector at t[i]; returns its value for the packet and the next index. */
  private selector(
    t: string[],
    i: number,
    pkt: Pkt,
    fail: (why: string) => never,
  ): [string, number] {
    const w = t[i];
    if ((w === "ip" || w === "ip6") && (t[i + 1] === "saddr" || t[i + 1] === "daddr")) {
      const fam = nftFamily(parseIP(pkt.daddr)?.family ?? 4);
      if (fam !== w) fail(`${w} selector on an ${fam} packet`);
      return [t[i + 1] === "saddr" ? pkt.saddr : pkt.daddr, i + 2];
    }
    if (w === "meta" && t[i + 1] === "l4proto") return [pkt.proto, i + 2];
    if (w === "th" && t[i + 1] === "dport") return [String(pkt.dport), i + 2];
    if (w === "iifname") return [pkt.iif, i + 1];
    if (w === "meta" && t[i + 1] === "mark") {
      if (t[i + 2] === "&") {
        const m = Number(t[i + 3]);
        if (!Number.isFinite(m)) fail("mark mask");
        return [String((pkt.mark & m) >>> 0), i + 4];
      }
      return [String(pkt.mark), i + 2];
    }
    return fail(`selector "${w}"`);
  }
}

/** `name: key : value "comment"`, for steps. */
function describe(name: string, e: Element): string {
  const v = e.value === undefined ? "" : ` : ${e.value.join(" . ")}`;
  const c = e.comment === undefined ? "" : ` (${e.comment})`;
  return `${name}: ${e.key.join(" . ")}${v}${c}`;
}

function matchLiteral(value: string, rhs: string, fail: (why: string) => never): boolean {
  if (rhs.startsWith('"')) {
    const s = rhs.slice(1, -1);
    return s.endsWith("*") ? value.startsWith(s.slice(0, -1)) : value === s;
  }
  if (rhs.includes("/")) {
    const c = parseCIDR(rhs) ?? fail(`CIDR ${rhs}`);
    const ip = parseIP(value);
    return ip !== null && cidrContains(c, ip);
  }
  if (parseIP(rhs)) return canon(value) === canon(rhs);
  if (/^(0x[0-9a-f]+|[0-9]+)$/i.test(rhs)) return Number(value) === Number(rhs);
  if (/^(tcp|udp|sctp)$/.test(rhs)) return value === rhs;
  return fail(`literal ${rhs}`);
}
