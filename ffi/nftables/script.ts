/**
 * Renders transactions as nft script text, the input libnftables parses.
 *
 * @module
 */
import type { Chain, Element, Family, Map, NftObject, Operation, Set } from "./types.ts";

/** Quotes a string for nft syntax. */
export function quote(s: string): string {
  return `"${s.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

function commentClause(comment: string | undefined): string {
  return comment === undefined ? "" : ` comment ${quote(comment)}`;
}

function chainSpec(c: Chain): string {
  const parts: string[] = [];
  if (c.type !== undefined && c.hook !== undefined) {
    parts.push(`type ${c.type} hook ${c.hook} priority ${c.priority ?? 0} ;`);
    if (c.policy !== undefined) parts.push(`policy ${c.policy} ;`);
  }
  if (c.comment !== undefined) parts.push(`comment ${quote(c.comment)} ;`);
  return parts.length === 0 ? "" : ` { ${parts.join(" ")} }`;
}

function setSpec(s: Set | Map): string {
  // A `type` starting with "typeof " declares key (and data) by expression,
  // as nft lists it back: `typeof ip daddr . th dport : ip daddr`.
  const typeOf = s.type.startsWith("typeof ");
  const key = typeOf ? s.type.slice(7) : s.type;
  const type = s.kind === "map" ? `${key} : ${s.dataType}` : key;
  const parts = [`${typeOf ? "typeof" : "type"} ${type} ;`];
  if (s.flags !== undefined && s.flags.length > 0) parts.push(`flags ${s.flags.join(",")} ;`);
  if (s.timeout !== undefined) parts.push(`timeout ${s.timeout}s ;`);
  if (s.comment !== undefined) parts.push(`comment ${quote(s.comment)} ;`);
  return ` { ${parts.join(" ")} }`;
}

/** Renders one element as it appears inside `{ ... }`. */
export function renderElement(e: Element, withValue: boolean): string {
  let s = e.key.join(" . ") + commentClause(e.comment);
  if (withValue && e.value !== undefined) s += ` : ${e.value.join(" . ")}`;
  return s;
}

function elementTarget(e: Element): string {
  const name = e.set ?? e.map;
  if (name === undefined) throw new TypeError("element needs a set or map name");
  return name;
}

function objectNoun(o: NftObject): string {
  return o.kind;
}

/** Renders a single operation as one nft command. */
export function renderOperation(family: Family, table: string, op: Operation): string {
  const { verb, obj } = op;
  const where = `${family} ${table}`;
  switch (obj.kind) {
    case "table":
      return verb === "add" || verb === "create"
        ? `${verb} table ${where}${obj.comment ? ` { comment ${quote(obj.comment)} ; }` : ""}`
        : `${verb} table ${where}`;
    case "chain":
      if (verb === "add" || verb === "create") {
        return `${verb} chain ${where} ${obj.name}${chainSpec(obj)}`;
      }
      return `${verb} chain ${where} ${obj.name}`;
    case "set":
    case "map":
      if (verb === "add" || verb === "create") {
        return `${verb} ${objectNoun(obj)} ${where} ${obj.name}${setSpec(obj)}`;
      }
      return `${verb} ${objectNoun(obj)} ${where} ${obj.name}`;
    case "counter":
      if (verb === "add" || verb === "create" || verb === "delete") {
        return `${verb} counter ${where} ${obj.name}`;
      }
      throw new TypeError(`cannot ${verb} a counter`);
    case "element": {
      const withValue = verb !== "delete";
      return `${
        verb === "create" ? "create" : verb === "delete" ? "delete" : "add"
      } element ${where} ${elementTarget(obj)} { ${renderElement(obj, withValue)} }`;
    }
    case "rule": {
      const body = obj.rule + commentClause(obj.comment);
      switch (verb) {
        case "add":
        case "create":
          return obj.position === undefined
            ? `add rule ${where} ${obj.chain} ${body}`
            : `add rule ${where} ${obj.chain} position ${obj.position} ${body}`;
        case "insert":
          return obj.position === undefined
            ? `insert rule ${where} ${obj.chain} ${body}`
            : `insert rule ${where} ${obj.chain} position ${obj.position} ${body}`;
        case "replace":
          return `replace rule ${where} ${obj.chain} handle ${requireHandle(obj.handle)} ${body}`;
        case "delete":
          return `delete rule ${where} ${obj.chain} handle ${requireHandle(obj.handle)}`;
        case "flush":
          throw new TypeError("cannot flush a rule");
      }
    }
  }
  throw new TypeError(`unknown object ${(obj as NftObject).kind}`);
}

function requireHandle(h: number | undefined): number {
  if (h === undefined) throw new TypeError("rule replace/delete needs a handle");
  return h;
}

/**
 * Renders operations as a script, one command per line, except that runs of
 * element adds or deletes on the same set are folded into one command: the
 * parser handles one big `{ ... }` far faster than thousands of commands.
 */
export function renderScript(family: Family, table: string, ops: readonly Operation[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < ops.length) {
    const op = ops[i];
    if (op.obj.kind === "element" && (op.verb === "add" || op.verb === "delete")) {
      const target = elementTarget(op.obj);
      const withValue = op.verb === "add";
      const parts: string[] = [];
      let j = i;
      while (j < ops.length) {
        const o = ops[j];
        if (o.verb !== op.verb || o.obj.kind !== "element" || elementTarget(o.obj) !== target) {
          break;
        }
        parts.push(renderElement(o.obj, withValue));
        j++;
      }
      out.push(`${op.verb} element ${family} ${table} ${target} { ${parts.join(", ")} }`);
      i = j;
      continue;
    }
    out.push(renderOperation(family, table, op));
    i++;
  }
  return out.join("\n") + "\n";
}
