/**
 * What the packet tracer takes and answers: the packet, the node's facts, and the result with
 * every branch and step. `tracer.ts` re-exports them beside `trace()`.
 *
 * @module
 */
/** The first packet of a connection. */
export interface Packet {
  /** Source address. */
  src: string;
  /** Destination address. */
  dst: string;
  /** Transport protocol. */
  proto: "tcp" | "udp" | "sctp";
  /** Destination port. */
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
  /** The netfilter hook. */
  hook: string;
  /** The chain. */
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
  /** How this path ends. */
  verdict: Verdict;
  /** `ip:port` (IPv6 `[ip]:port`) when DNATed. */
  dnat?: string;
  /** True when this path is masqueraded. */
  masquerade: boolean;
  /** Hook that decided a DROP/REJECT, or the last hook traversed. */
  hook: string;
  /** Share of new connections taking this path. */
  probability: number;
  /** Why the packet ends this way, in words. */
  reason: string;
  /** What happened on the way. */
  steps: Step[];
}

/** What happens to the packet, merged over all possible paths. */
export interface TraceResult {
  /** The verdict (every path agrees). */
  verdict: Verdict;
  /** Every possible DNAT target, sorted. */
  dnat: string[];
  /** Each DNAT target with the share of connections it gets and whether they are masqueraded. */
  candidates: { dnat: string; probability: number; masquerade: boolean }[];
  /** True when some path masquerades. */
  masquerade: boolean;
  /** The reason of the most likely path. */
  reason: string;
  /** Every possible path. */
  branches: Branch[];
}
