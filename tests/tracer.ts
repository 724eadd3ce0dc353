/**
 * A packet tracer for kube-proxy tables: follows the first packet of a new
 * connection through a {@link TableState} (hooks in kernel order) and says
 * what happens to it. It interprets exactly the rule vocabulary the builder
 * emits and throws on anything else, so a rule it does not understand can
 * never be silently ignored.
 *
 * `numgen random` rules fork the trace: every endpoint a packet could be
 * sent to is reported.
 *
 * @module
 */
import type {
  Element,
  Hook,
  Map as NftMap,
  Rule,
  Set as NftSet,
  TableState,
} from "../ffi/nftables/types.ts";
import { canonicalIP, cidrContains, parseCIDR, parseIP } from "../proxier/ip.ts";

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

/** One possible path of the packet. */
export interface Branch {
  verdict: "ACCEPT" | "DROP" | "REJECT";
  /** `ip:port` (IPv6 `[ip]:port`) when DNATed. */
  dnat?: string;
  masquerade: boolean;
  /** Hook that decided a DROP/REJECT, or the last hook traversed. */
  hook: string;
}

/** What happens to the packet, merged over all possible paths. */
export interface TraceResult {
  verdict: "ACCEPT" | "DROP" | "REJECT";
  /** Every possible DNAT target, sorted. */
  dnat: string[];
  /** True when some path masquerades. */
  masquerade: boolean;
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
}

type Outcome = "next" | "return" | "accept" | "drop" | "reject";
interface Res {
  pkt: Pkt;
  v: Outcome;
}

function clone(p: Pkt): Pkt {
  return { ...p };
}

function canon(s: string): string {
  return canonicalIP(s) ?? s;
}

/** Splits a rule into tokens; quoted strings and `{ ... }` groups stay whole. */
export function tokenize(rule: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < rule.length) {
    const c = rule[i];
    if (c === " " || c === "\t") {
      i++;
      continue;
    }
    if (c === '"') {
      const j = rule.indexOf('"', i + 1);
      if (j < 0) throw new Error(`unterminated string in rule: ${rule}`);
      out.push(rule.slice(i, j + 1));
      i = j + 1;
      continue;
    }
    if (c === "{") {
      const j = rule.indexOf("}", i);
      if (j < 0) throw new Error(`unterminated { in rule: ${rule}`);
      out.push(rule.slice(i, j + 1));
      i = j + 1;
      continue;
    }
    let j = i;
    while (j < rule.length && rule[j] !== " " && rule[j] !== "\t") j++;
    out.push(rule.slice(i, j));
    i = j;
  }
  return out;
}

const HOOK_ORDER: Record<Packet["from"], Hook[]> = {
  offnode: ["prerouting"],
  pod: ["prerouting"],
  host: ["output"],
};

/** Traces the first packet of a connection through the table. */
export function trace(state: TableState, pkt: Packet, env: TraceEnv): TraceResult {
  return new Tracer(state, env).run(pkt);
}

class Tracer {
  private readonly local: Set<string>;

  constructor(private readonly state: TableState, env: TraceEnv) {
    this.local = new Set(env.nodeIPs.map(canon));
  }

  run(p: Packet): TraceResult {
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
    };
    const branches: Branch[] = [];
    for (const [pkt, hook, v] of this.walk(start, p.from)) {
      branches.push({
        verdict: v,
        masquerade: pkt.masq,
        hook,
        ...(pkt.dnat === undefined ? {} : { dnat: pkt.dnat }),
      });
    }
    const verdicts = new Set(branches.map((b) => b.verdict));
    if (verdicts.size !== 1) {
      throw new Error(`trace paths disagree: ${JSON.stringify(branches)}`);
    }
    return {
      verdict: branches[0].verdict,
      dnat: [...new Set(branches.flatMap((b) => b.dnat ?? []))].sort(),
      masquerade: branches.some((b) => b.masquerade),
      branches,
    };
  }

  /** Walks the hooks in kernel order, forking where rules fork. */
  private walk(start: Pkt, from: Packet["from"]): [Pkt, string, Branch["verdict"]][] {
    let live: Pkt[] = [start];
    const done: [Pkt, string, Branch["verdict"]][] = [];
    const pass = (hook: Hook, pkts: Pkt[]): Pkt[] => {
      const next: Pkt[] = [];
      for (const p of pkts) {
        for (const r of this.runHook(hook, p)) {
          if (r.v === "drop" || r.v === "reject") {
            done.push([r.pkt, hook, r.v === "drop" ? "DROP" : "REJECT"]);
          } else next.push(r.pkt);
        }
      }
      return next;
    };
    for (const h of HOOK_ORDER[from]) live = pass(h, live);
    for (const p of live) {
      const toLocal = this.isLocal(p.daddr);
      let ps = [p];
      if (from === "host") {
        ps = pass("postrouting", ps);
        if (toLocal) ps = pass("input", ps);
        for (const q of ps) done.push([q, toLocal ? "input" : "postrouting", "ACCEPT"]);
      } else if (toLocal) {
        ps = pass("input", ps);
        for (const q of ps) done.push([q, "input", "ACCEPT"]);
      } else {
        ps = pass("forward", ps);
        ps = pass("postrouting", ps);
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

  /** Runs every base chain of a hook in priority order; nat chains stop after a NAT. */
  private runHook(hook: Hook, pkt: Pkt): Res[] {
    const chains = [...this.state.chains.values()]
      .filter((c) => c.chain.hook === hook)
      .sort((a, b) => (a.chain.priority ?? 0) - (b.chain.priority ?? 0));
    let live: Res[] = [{ pkt, v: "accept" }];
    for (const c of chains) {
      const next: Res[] = [];
      for (const r of live) {
        if (r.v === "drop" || r.v === "reject") {
          next.push(r);
          continue;
        }
        for (const o of this.runChain(c.chain.name, r.pkt, 0)) {
          next.push({ pkt: o.pkt, v: o.v === "drop" || o.v === "reject" ? o.v : "accept" });
        }
      }
      live = next;
    }
    return live;
  }

  private runChain(name: string, pkt: Pkt, depth: number): Res[] {
    if (depth > 16) throw new Error(`chain recursion too deep at ${name}`);
    const c = this.state.chains.get(name);
    if (!c) throw new Error(`jump to missing chain ${name}`);
    return this.runFrom(c.rules, 0, pkt, depth);
  }

  /** Runs rules[i..]; "return" means fell off the end or hit `return`. */
  private runFrom(rules: Rule[], i: number, pkt: Pkt, depth: number): Res[] {
    if (i >= rules.length) return [{ pkt, v: "return" }];
    const out: Res[] = [];
    for (const r of this.runRule(rules[i].rule, pkt, depth)) {
      if (r.v === "next") out.push(...this.runFrom(rules, i + 1, r.pkt, depth));
      else out.push(r);
    }
    return out;
  }

  private lookup(name: string): { set: NftSet | NftMap; elements: Element[] } {
    const s = this.state.sets.get(name);
    if (s) return { set: s.set, elements: s.elements };
    const m = this.state.maps.get(name);
    if (m) return { set: m.map, elements: m.elements };
    throw new Error(`reference to missing set or map @${name}`);
  }

  private findElement(name: string, key: string[]): Element | undefined {
    const { elements } = this.lookup(name);
    const want = key.map(canon).join(" . ");
    return elements.find((e) => e.key.map(canon).join(" . ") === want);
  }

  /** Applies a verdict word to the rest of the trace. */
  private verdict(word: string, target: string | undefined, pkt: Pkt, depth: number): Res[] {
    switch (word) {
      case "accept":
      case "drop":
      case "reject":
      case "return":
        return [{ pkt, v: word }];
      case "jump":
        return this.runChain(target!, pkt, depth + 1).map((r) =>
          r.v === "return" ? { pkt: r.pkt, v: "next" } : r
        );
      case "goto":
        // A goto's chain returning ends the calling chain too.
        return this.runChain(target!, pkt, depth + 1);
    }
    throw new Error(`unknown verdict ${word}`);
  }

  /** Evaluates one rule; returns every possible result (numgen forks). */
  private runRule(rule: string, pkt0: Pkt, depth: number): Res[] {
    const t = tokenize(rule);
    const fail = (why: string): never => {
      throw new Error(`tracer: cannot interpret ${why} in rule: ${rule}`);
    };
    const go = (i: number, pkt: Pkt): Res[] => {
      if (i >= t.length) return [{ pkt, v: "next" }];
      const w = t[i];
      const miss: Res[] = [{ pkt, v: "next" }];
      // Verdicts.
      if (w === "accept" || w === "drop" || w === "reject" || w === "return") {
        if (i !== t.length - 1) fail(`tokens after ${w}`);
        return this.verdict(w, undefined, pkt, depth);
      }
      if (w === "jump" || w === "goto") {
        if (i !== t.length - 2) fail(`tokens after ${w}`);
        return this.verdict(w, t[i + 1], pkt, depth);
      }
      // Fixed matches.
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
        // Either outcome is possible: trace both.
        return [...miss, ...go(i + 5, clone(pkt))];
      }
      // Statements.
      if (w === "meta" && t[i + 1] === "mark" && t[i + 2] === "set") {
        if (t[i + 3] !== "meta" || t[i + 4] !== "mark") fail("mark set");
        const op = t[i + 5], v = Number(t[i + 6]);
        if (!Number.isFinite(v)) fail("mark value");
        const p = clone(pkt);
        if (op === "or" || op === "|") p.mark = (p.mark | v) >>> 0;
        else if (op === "xor" || op === "^") p.mark = (p.mark ^ v) >>> 0;
        else fail(`mark operator ${op}`);
        return go(i + 7, p);
      }
      if (w === "update") {
        const set = t[i + 1];
        if (!set?.startsWith("@") || !/^\{ ip6? saddr \}$/.test(t[i + 2] ?? "")) fail("update");
        this.lookup(set.slice(1));
        return go(i + 3, pkt);
      }
      if (w === "dnat") {
        let j = i + 1;
        if (t[j] === "ip" || t[j] === "ip6") j++;
        if (t[j] === "to" && t[t.length - 2] === "map") return this.dnatMap(t, j + 1, pkt, fail);
        if (t[j] !== "to" || j + 2 !== t.length) fail("dnat");
        const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(t[j + 1]) ?? fail("dnat target");
        const p = clone(pkt);
        p.daddr = canon(m[1] ?? m[2]);
        p.dport = Number(m[3]);
        p.dnat = t[j + 1];
        return [{ pkt: p, v: "accept" }];
      }
      if (w === "masquerade") {
        if (!(i === t.length - 1 || (i === t.length - 2 && t[i + 1] === "fully-random"))) {
          fail("masquerade options");
        }
        const p = clone(pkt);
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
        const e = this.findElement(ref.slice(1), values);
        if (!e) return miss;
        const [word, target] = (e.value ?? []).join(" ").split(" ");
        return this.verdict(word, target, pkt, depth);
      }
      let neg = false;
      if (t[j] === "!=") {
        neg = true;
        j++;
      } else if (t[j] === "==") j++;
      const rhs = t[j] ?? fail("missing value");
      let hit: boolean;
      if (rhs.startsWith("@")) {
        hit = this.findElement(rhs.slice(1), values) !== undefined;
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
  private dnatMap(t: string[], from: number, pkt: Pkt, fail: (why: string) => never): Res[] {
    const ref = t[t.length - 1];
    if (!ref.startsWith("@")) fail("dnat map reference");
    const parts: string[][] = [[]];
    for (const tok of t.slice(from, t.length - 2)) {
      if (tok === ".") parts.push([]);
      else parts[parts.length - 1].push(tok);
    }
    let fork: number | undefined;
    const fixed = parts.map((p) => {
      if (p[0] === "numgen") {
        if (p[1] !== "random" || p[2] !== "mod" || p.length !== 4) fail("numgen in a map key");
        fork = Number(p[3]);
        return undefined;
      }
      // nft lists a map key's `th dport` as `tcp dport` when the map's data
      // is typed that way: the same transport-header load, no protocol match.
      if (p.length === 2 && p[1] === "dport" && /^(tcp|udp|sctp)$/.test(p[0])) {
        return String(pkt.dport);
      }
      const [v, n] = this.selector(p, 0, pkt, fail);
      if (n !== p.length) fail(`map key part "${p.join(" ")}"`);
      return v;
    });
    const out: Res[] = [];
    for (let b = 0; b < (fork ?? 1); b++) {
      const key = fixed.map((v) => v ?? String(b));
      const e = this.findElement(ref.slice(1), key);
      if (e === undefined || e.value === undefined) {
        out.push({ pkt, v: "next" });
        continue;
      }
      const [addr, port] = e.value.join(" . ").split(" . ");
      const p = clone(pkt);
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
      const fam = parseIP(pkt.daddr)?.family === 6 ? "ip6" : "ip";
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
