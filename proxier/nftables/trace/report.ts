/**
 * Plain-text renderings of a trace and of an explained Service, for people
 * (`-o json` prints the objects themselves).
 *
 * @module
 */
import type { Explained, Reach } from "./explain.ts";
import type { Packet, Step, TraceResult } from "./tracer.ts";

const SOURCE: Record<Packet["from"], string> = {
  pod: "from a pod",
  offnode: "from outside",
  host: "from the node",
};

function pct(p: number): string {
  const v = p * 100;
  return `${Number.isInteger(v) ? v : v.toFixed(1)}%`;
}

function stepLines(steps: Step[]): string[] {
  const out: string[] = [];
  for (const s of steps) {
    const head = `  ${s.hook.padEnd(11)} ${s.chain}`;
    out.push(s.rule === undefined ? head : `${head}: ${s.rule}`);
    if (s.element !== undefined) out.push(`${" ".repeat(14)}-> ${s.element}`);
  }
  return out;
}

/** A trace as text: the packet, the most likely path step by step, the verdict and candidates. */
export function traceText(pkt: Packet, r: TraceResult): string {
  const v6 = pkt.dst.includes(":");
  const dst = v6 ? `[${pkt.dst}]:${pkt.dport}` : `${pkt.dst}:${pkt.dport}`;
  const lines = [
    `packet: ${pkt.proto} ${pkt.src} -> ${dst} (${SOURCE[pkt.from]}${
      pkt.iif ? `, iif ${pkt.iif}` : ""
    })`,
    "path:",
  ];
  const top = [...r.branches].sort((a, b) => b.probability - a.probability)[0];
  lines.push(...stepLines(top.steps));
  if (r.branches.length > 1) {
    lines.push(`  (${r.branches.length - 1} other path(s), differing in the endpoint picked)`);
  }
  lines.push(`verdict: ${r.verdict}: ${r.reason}`);
  if (r.candidates.length > 1) lines[lines.length - 1] = `verdict: ${r.verdict}: DNAT`;
  for (const c of r.candidates) {
    lines.push(
      `  ${c.dnat.padEnd(24)} ${pct(c.probability).padStart(6)}  ${
        c.masquerade ? "masqueraded" : "source kept"
      }`,
    );
  }
  return lines.join("\n");
}

function reachLine(r: Reach): string {
  const head = `      ${SOURCE[r.source].padEnd(14)} ${r.verdict}`;
  if (r.endpoints.length === 0) return `${head}  ${r.reason}`;
  const masq = r.endpoints.some((e) => e.masquerade) ? ", masqueraded" : "";
  return `${head}  ${r.endpoints.map((e) => `${e.dnat} ${pct(e.probability)}`).join(", ")}${masq}`;
}

/** An explained Service as text. */
export function explainText(e: Explained): string {
  if (e.ports.length === 0) {
    return `Service ${e.service}: nothing programmed in the ${e.family} table on this node`;
  }
  const lines = [`Service ${e.service} (${e.family} table)`];
  for (const p of e.ports) {
    lines.push(`  port ${p.id}`);
    for (const f of p.frontends) {
      lines.push(`    ${f.kind} ${f.key}`);
      for (const el of f.elements) lines.push(`      element ${el}`);
      for (const c of f.chains) lines.push(`      chain   ${c}`);
      if (f.sourceRanges) {
        lines.push(`      loadBalancerSourceRanges: ${f.sourceRanges.join(", ")}`);
      }
      for (const r of f.reach) lines.push(reachLine(r));
    }
    if (p.affinitySets.length > 0) {
      lines.push(
        `    ClientIP affinity: ${p.affinitySets.length} set(s), e.g. ${p.affinitySets[0]}`,
      );
    }
  }
  return lines.join("\n");
}
