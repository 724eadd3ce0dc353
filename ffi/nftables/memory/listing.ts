/**
 * The listings of the in-memory nftables: a table as a {@link TableState}
 * (what the kernel lists back) and as stable `nft list table` text for
 * golden tests.
 *
 * @module
 */
import { formatNftDuration } from "../../../net/duration.ts";
import type { Family, TableState } from "../types.ts";
import {
  compareKeys,
  isBase,
  listedDef,
  normType,
  type TableData,
  toElement,
  toRule,
} from "./table.ts";

/**
 * The table as a {@link TableState} (fresh objects, safe to keep), or null
 * when it does not exist. Rules carry their handles; a comment written
 * inside a rule body is moved to `comment`, as the kernel does.
 */
export function tableState(family: Family, table: string, t: TableData | null): TableState | null {
  if (t === null) return null;
  const st: TableState = {
    family: family,
    name: table,
    chains: new globalThis.Map(),
    sets: new globalThis.Map(),
    maps: new globalThis.Map(),
  };
  if (t.comment !== undefined) st.comment = t.comment;
  for (const [name, c] of t.chains) {
    st.chains.set(name, {
      chain: { ...c.chain },
      rules: c.rules.map((r) => toRule(name, r)),
    });
  }
  for (const [name, s] of t.sets) {
    const elements = [...s.elements.values()].map((e) => toElement(s, e));
    const def = listedDef(s.def);
    if (def.kind === "set") st.sets.set(name, { set: def, elements });
    else st.maps.set(name, { map: def, elements });
  }
  return st;
}

/**
 * A stable text dump in `nft list table` layout for golden tests: sets,
 * maps and chains sorted by name, elements sorted by key, rules in order,
 * no handles. Empty string when the table does not exist.
 */
export function dumpTable(family: Family, table: string, t: TableData | null): string {
  if (t === null) return "";
  const q = (s: string) => `"${s.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
  const out = [`table ${family} ${table} {`];
  if (t.comment !== undefined) out.push(`\tcomment ${q(t.comment)}`);
  const byName = <T>(m: globalThis.Map<string, T>) =>
    [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // nft lists named counters before sets, values and all.
  for (const [name, c] of byName(t.counters)) {
    out.push(`\tcounter ${name} {`, `\t\tpackets ${c.packets} bytes ${c.bytes}`, "\t}");
  }
  for (const kind of ["set", "map"] as const) {
    for (const [name, s] of byName(t.sets)) {
      if (s.def.kind !== kind) continue;
      const d = s.def;
      out.push(`\t${kind} ${name} {`);
      const typeLine = d.type.startsWith("typeof ") ? normType(d.type) : `type ${normType(d.type)}`;
      out.push(`\t\t${typeLine}${d.kind === "map" ? ` : ${normType(d.dataType)}` : ""}`);
      const flags = listedDef(d).flags;
      if (flags !== undefined) out.push(`\t\tflags ${flags.join(",")}`);
      if (d.timeout !== undefined) out.push(`\t\ttimeout ${formatNftDuration(d.timeout)}`);
      if (d.comment !== undefined) out.push(`\t\tcomment ${q(d.comment)}`);
      const elems = [...s.elements.entries()].sort(([a], [b]) => compareKeys(a, b));
      if (elems.length > 0) {
        out.push(`\t\telements = {`);
        elems.forEach(([k, e], i) => {
          const c = e.comment === undefined ? "" : ` comment ${q(e.comment)}`;
          const v = e.value === undefined ? "" : ` : ${e.value.map((p) => p.text).join(" . ")}`;
          out.push(`\t\t\t${k}${c}${v}${i < elems.length - 1 ? "," : ""}`);
        });
        out.push(`\t\t}`);
      }
      out.push(`\t}`);
    }
  }
  for (const [name, c] of byName(t.chains)) {
    out.push(`\tchain ${name} {`);
    const ch = c.chain;
    if (isBase(ch)) {
      out.push(
        `\t\ttype ${ch.type} hook ${ch.hook} priority ${ch.priority ?? 0}; policy ${
          ch.policy ?? "accept"
        };`,
      );
    }
    if (ch.comment !== undefined) out.push(`\t\tcomment ${q(ch.comment)}`);
    for (const r of c.rules) {
      out.push(`\t\t${r.body}${r.comment === undefined ? "" : ` comment ${q(r.comment)}`}`);
    }
    out.push(`\t}`);
  }
  out.push("}");
  return out.join("\n") + "\n";
}
