/**
 * Label and field selectors of the fake API server (tests/fakeapi/server.ts), as the real
 * server parses them for list and watch requests.
 * @module
 */
import type { KObject } from "./resources.ts";

/** A compiled selector. */
export type Filter = (o: KObject) => boolean;

/** Splits a selector on commas that are not inside parentheses. */
function splitTerms(sel: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of sel) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter((s) => s !== "");
}

/** Compiles a label selector; throws Error on syntax it does not understand. */
export function parseLabelSelector(sel: string): Filter {
  const tests: Filter[] = [];
  const labelsOf = (o: KObject) => o.metadata?.labels ?? {};
  for (const term of splitTerms(sel)) {
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term))) {
      const [, key, op, list] = m;
      const values = new Set(list.split(",").map((s) => s.trim()).filter((s) => s !== ""));
      tests.push(
        op === "in"
          ? (o) => key in labelsOf(o) && values.has(labelsOf(o)[key])
          : (o) => !(key in labelsOf(o)) || !values.has(labelsOf(o)[key]),
      );
    } else if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(term))) {
      const [, key, op, value] = m;
      tests.push(
        op === "!="
          ? (o) => labelsOf(o)[key] !== value
          : (o) => key in labelsOf(o) && labelsOf(o)[key] === value,
      );
    } else if ((m = /^!([\w./-]+)$/.exec(term))) {
      const key = m[1];
      tests.push((o) => !(key in labelsOf(o)));
    } else if ((m = /^([\w./-]+)$/.exec(term))) {
      const key = m[1];
      tests.push((o) => key in labelsOf(o));
    } else {
      throw new Error(`unable to parse requirement: "${term}"`);
    }
  }
  return (o) => tests.every((t) => t(o));
}

/** Compiles a field selector over metadata.name / metadata.namespace. */
export function parseFieldSelector(sel: string): Filter {
  const tests: Filter[] = [];
  for (const term of splitTerms(sel)) {
    const m = /^(metadata\.name|metadata\.namespace)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw new Error(`field label not supported: "${term}"`);
    const [, field, op, value] = m;
    const get = (o: KObject) =>
      (field === "metadata.name" ? o.metadata?.name : o.metadata?.namespace) ?? "";
    tests.push(op === "!=" ? (o) => get(o) !== value : (o) => get(o) === value);
  }
  return (o) => tests.every((t) => t(o));
}
