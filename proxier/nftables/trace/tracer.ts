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
 * traced: other tables on the node may act on the packet too. The pure pieces (selectors,
 * literals, the packet fork, a map key) are in `expr.ts`, the result's types in `types.ts`.
 *
 * @module
 */
import { ruleWords } from "../../../ffi/nftables/tokens.ts";
import type { Chain, Element, Hook, Rule } from "../../../ffi/nftables/types.ts";
import { parseIP } from "../../../net/ip.ts";
import {
  canon,
  describe,
  dnatKey,
  type Fail,
  fork,
  isLocal,
  matchLiteral,
  type Pkt,
  reasonOf,
  type Res,
  selector,
} from "./expr.ts";
import { classOfSet } from "../names.ts";
import type { RulesetReader } from "./reader.ts";
import type { Branch, Packet, Step, TraceEnv, TraceResult, Verdict } from "./types.ts";

export type { Branch, Packet, Step, TraceEnv, TraceResult, Verdict } from "./types.ts";

/** One rule being evaluated: its words, where it is, and how the trace goes on after word i. */
interface RuleRun {
  t: string[];
  depth: number;
  here: Step;
  fail: Fail;
  go: (i: number, pkt: Pkt) => Promise<Res[]>;
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

class Tracer {
  readonly #local: Set<string>;
  #bases: Promise<Chain[]> | undefined;

  readonly #reader: RulesetReader;

  constructor(reader: RulesetReader, env: TraceEnv) {
    this.#reader = reader;
    this.#local = new Set(env.nodeIPs.map(canon));
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
    for (const [pkt, hook, verdict] of await this.#walk(start, p.from)) {
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
  async #walk(start: Pkt, from: Packet["from"]): Promise<[Pkt, string, Verdict][]> {
    let live: Pkt[] = [start];
    const done: [Pkt, string, Verdict][] = [];
    const pass = async (hook: Hook, pkts: Pkt[]): Promise<Pkt[]> => {
      const next: Pkt[] = [];
      for (const p of pkts) {
        for (const r of await this.#runHook(hook, p)) {
          if (r.v === "drop" || r.v === "reject") {
            done.push([r.pkt, hook, r.v === "drop" ? "DROP" : "REJECT"]);
          } else next.push(r.pkt);
        }
      }
      return next;
    };
    for (const h of HOOK_ORDER[from]) live = await pass(h, live);
    for (const p of live) {
      const toLocal = isLocal(p.daddr, this.#local);
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

  /** Runs every base chain of a hook in priority order. */
  async #runHook(hook: Hook, pkt: Pkt): Promise<Res[]> {
    this.#bases ??= this.#reader.baseChains();
    const chains = (await this.#bases).filter((c) => c.hook === hook)
      .sort((a, b) => (a.priority ?? 0) - (b.priority ?? 0));
    let live: Res[] = [{ pkt, v: "accept" }];
    for (const c of chains) {
      const next: Res[] = [];
      for (const r of live) {
        if (r.v === "drop" || r.v === "reject") {
          next.push(r);
          continue;
        }
        for (const o of await this.#runChain(c.name, r.pkt, 0, hook)) {
          next.push({ pkt: o.pkt, v: o.v === "drop" || o.v === "reject" ? o.v : "accept" });
        }
      }
      live = next;
    }
    return live;
  }

  async #runChain(name: string, pkt: Pkt, depth: number, hook: string): Promise<Res[]> {
    if (depth > 16) throw new Error(`chain recursion too deep at ${name}`);
    const rules = await this.#reader.rules(name);
    if (!rules) throw new Error(`jump to missing chain ${name}`);
    return this.#runFrom(rules, 0, pkt, depth, { hook, chain: name });
  }

  /** Runs rules[i..]; "return" means fell off the end or hit `return`. */
  async #runFrom(
    rules: Rule[],
    i: number,
    pkt: Pkt,
    depth: number,
    at: Step,
  ): Promise<Res[]> {
    if (i >= rules.length) return [{ pkt, v: "return" }];
    const out: Res[] = [];
    for (const r of await this.#runRule(rules[i].rule, pkt, depth, at)) {
      if (r.v === "next") out.push(...await this.#runFrom(rules, i + 1, r.pkt, depth, at));
      else out.push(r);
    }
    return out;
  }

  async #element(name: string, key: string[]): Promise<Element | undefined> {
    return await this.#reader.element(name, key.map(canon));
  }

  /** Applies a verdict word to the rest of the trace. */
  async #verdict(
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
        return (await this.#runChain(target!, pkt, depth + 1, at.hook)).map((r) =>
          r.v === "return" ? { pkt: r.pkt, v: "next" } : r
        );
      case "goto":
        // A goto's chain returning ends the calling chain too.
        return await this.#runChain(target!, pkt, depth + 1, at.hook);
    }
    throw new Error(`unknown verdict ${word}`);
  }
  /** Evaluates one rule; returns every possible result (numgen forks). */
  #runRule(rule: string, pkt0: Pkt, depth: number, at: Step): Promise<Res[]> {
    const t = ruleWords(rule);
    const run: RuleRun = {
      t,
      depth,
      here: { ...at, rule },
      fail: (why: string): never => {
        throw new Error(`tracer: cannot interpret ${why} in rule: ${rule}`);
      },
      go: async (i, pkt) => {
        if (i >= t.length) return [{ pkt, v: "next" }];
        return await (this.#statement(run, i, pkt) ?? this.#nat(run, i, pkt) ??
          this.#match(run, i, pkt));
      },
    };
    return run.go(0, pkt0);
  }

  /**
   * Verdicts, `ct`, `fib`, `counter`, `numgen`, `meta mark set` and `update` at word i; else
   * undefined.
   */
  #statement(run: RuleRun, i: number, pkt: Pkt): Promise<Res[]> | Res[] | undefined {
    const { t, fail, here, depth, go } = run;
    const w = t[i];
    const miss: Res[] = [{ pkt, v: "next" }];
    if (w === "accept" || w === "drop" || w === "reject" || w === "return") {
      if (i !== t.length - 1) fail(`tokens after ${w}`);
      return this.#verdict(w, undefined, fork(pkt, here), depth, here);
    }
    if (w === "jump" || w === "goto") {
      if (i !== t.length - 2) fail(`tokens after ${w}`);
      return this.#verdict(w, t[i + 1], fork(pkt, here), depth, here);
    }
    if (w === "ct" && t[i + 1] === "state" && t[i + 2] === "new") return go(i + 3, pkt);
    if (w === "ct" && t[i + 1] === "status" && t[i + 2] === "dnat") {
      return pkt.dnat !== undefined ? go(i + 3, pkt) : miss;
    }
    if (w === "fib" && t[i + 2] === "type" && t[i + 3] === "local") {
      const a = t[i + 1] === "daddr" ? pkt.daddr : t[i + 1] === "saddr" ? pkt.saddr : fail("fib");
      return isLocal(a, this.#local) ? go(i + 4, pkt) : miss;
    }
    if (w === "counter") return go(counterEnd(t, i), pkt);
    if (w === "numgen") return this.#numgen(run, i, pkt);
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
    return undefined;
  }

  /** `numgen random mod N M`: either outcome is possible, so both are traced with their share. */
  async #numgen(run: RuleRun, i: number, pkt: Pkt): Promise<Res[]> {
    const { t, fail } = run;
    if (t[i + 1] !== "random" || t[i + 2] !== "mod") fail("numgen");
    const mod = Number(t[i + 3]), val = Number(t[i + 4]);
    if (!(mod > 0) || !Number.isInteger(val) || val >= mod) fail("numgen values");
    return [
      ...(mod > 1 ? [{ pkt: fork(pkt, undefined, (mod - 1) / mod), v: "next" as const }] : []),
      ...await run.go(i + 5, fork(pkt, undefined, 1 / mod)),
    ];
  }

  /** `dnat` and `masquerade` at word i (each ends the rule); else undefined. */
  #nat(run: RuleRun, i: number, pkt: Pkt): Promise<Res[]> | Res[] | undefined {
    const { t, fail, here } = run;
    const w = t[i];
    if (w === "dnat") {
      let j = i + 1;
      if (t[j] === "ip" || t[j] === "ip6") j++;
      if (t[j] === "to" && t[t.length - 2] === "map") {
        return this.#dnatMap(t, j + 1, pkt, fail, here);
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
    return undefined;
  }

  /** Selector expressions at word i: sel (. sel)* then a relation, set lookup or vmap. */
  async #match(run: RuleRun, i: number, pkt: Pkt): Promise<Res[]> {
    const { t, fail, here, depth } = run;
    const miss: Res[] = [{ pkt, v: "next" }];
    const values: string[] = [];
    let j = i;
    for (;;) {
      const [v, n] = selector(t, j, pkt, fail);
      values.push(v);
      j = n;
      if (t[j] !== ".") break;
      j++;
    }
    if (t[j] === "vmap") {
      const ref = t[j + 1];
      if (!ref?.startsWith("@") || j + 2 !== t.length) fail("vmap");
      const e = await this.#element(ref.slice(1), values);
      if (!e) return miss;
      const [word, target] = (e.value ?? []).join(" ").split(" ");
      const step = { ...here, element: describe(ref.slice(1), e) };
      return this.#verdict(word, target, fork(pkt, step), depth, step);
    }
    let neg = false;
    if (t[j] === "!=") {
      neg = true;
      j++;
    } else if (t[j] === "==") j++;
    const rhs = t[j] ?? fail("missing value");
    let hit: boolean;
    if (rhs.startsWith("@")) {
      const e = await this.#element(rhs.slice(1), values);
      hit = e !== undefined;
      // A class set's element is the frontend's dispatch: the step shows it, as a vmap's would.
      if (e !== undefined && !neg && classOfSet(rhs.slice(1)) !== undefined) {
        run.here = { ...here, element: describe(rhs.slice(1), e) };
      }
    } else {
      if (values.length !== 1) fail("concatenation compared to a literal");
      hit = matchLiteral(values[0], rhs, fail);
    }
    return hit !== neg ? run.go(j + 1, pkt) : miss;
  }

  /**
   * `dnat to <key> map @m`: the key is a concatenation of selectors, one of
   * which may be `numgen random mod N`, which forks the trace over every
   * bucket. A bucket without an element is a lookup miss: the rule does not
   * match and the packet goes on un-NATed.
   */
  async #dnatMap(
    t: string[],
    from: number,
    pkt: Pkt,
    fail: Fail,
    here: Step,
  ): Promise<Res[]> {
    const ref = t[t.length - 1];
    if (!ref.startsWith("@")) fail("dnat map reference");
    const { fixed, buckets: n } = dnatKey(t, from, pkt, fail);
    const out: Res[] = [];
    for (let b = 0; b < n; b++) {
      const key = fixed.map((v) => v ?? String(b));
      const e = await this.#element(ref.slice(1), key);
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
}

/**
 * The word after a `counter` statement at i: anonymous (`counter`, listed back as `counter packets
 * N bytes M`) or named (`counter name "x"`). Counting changes nothing the trace follows.
 */
function counterEnd(t: readonly string[], i: number): number {
  if (t[i + 1] === "name") return i + 3;
  if (t[i + 1] === "packets" && t[i + 3] === "bytes") return i + 5;
  return i + 1;
}
