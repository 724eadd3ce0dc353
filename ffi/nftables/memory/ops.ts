/**
 * The operations of the in-memory nftables: each op of a transaction checked
 * as the kernel (with nft 1.0.6 in front of it) checks it, and applied to the
 * transaction's {@link TableDraft}.
 *
 * @module
 */
import type {
  Chain,
  Counter,
  Element,
  Map as NftMap,
  Operation,
  Rule,
  Set as NftSet,
} from "../types.ts";
import { parseTypeList, type Part } from "./datatypes.ts";
import { EBUSY, EEXIST, ENOENT, EOPNOTSUPP, fail, invalid } from "./errors.ts";
import { analyseRule, checkComment, checkName } from "./rule.ts";
import {
  checkOverlap,
  emptyTable,
  holdChain,
  holdRule,
  isBase,
  normType,
  parseParts,
  releaseElement,
  releaseRule,
  sameFlags,
  TableDraft,
} from "./table.ts";

/** Applies one op to the draft (null: no table); returns the new draft. `where` names the table in errors. */
export function step(draft: TableDraft | null, op: Operation, where: string): TableDraft | null {
  if (op.obj.kind === "table") {
    switch (op.verb) {
      case "add":
      case "create":
        if (op.obj.comment !== undefined) checkComment(op.obj.comment);
        if (draft === null) return new TableDraft(emptyTable(op.obj.comment));
        if (op.verb === "create") fail(EEXIST, `${where} exists`);
        return draft;
      case "delete":
        if (draft === null) fail(ENOENT, `${where} does not exist`);
        return null;
      case "flush":
        if (draft === null) fail(ENOENT, `${where} does not exist`);
        flushTable(draft);
        return draft;
      default:
        invalid(`cannot ${op.verb} a table`);
    }
  }
  if (draft === null) fail(ENOENT, `${where} does not exist`);
  applyOp(draft, op);
  return draft;
}

function applyOp(d: TableDraft, op: Operation): void {
  const { verb, obj } = op;
  switch (obj.kind) {
    case "chain":
      return chainOp(d, verb, obj);
    case "rule":
      return ruleOp(d, verb, obj);
    case "set":
    case "map":
      return setOp(d, verb, obj);
    case "element":
      return elementOp(d, verb, obj);
    case "counter":
      return counterOp(d, verb, obj);
  }
  invalid(`unknown object kind ${(obj as { kind: string }).kind}`);
}

function counterOp(d: TableDraft, verb: Operation["verb"], c: Counter): void {
  checkName("counter", c.name);
  const old = d.t.counters.get(c.name);
  switch (verb) {
    case "add":
    case "create":
      if (old) {
        if (verb === "create") fail(EEXIST, `counter ${c.name} exists`);
        return;
      }
      d.t.counters.set(c.name, { handle: d.t.nextHandle++, packets: 0, bytes: 0 });
      return;
    case "delete": {
      if (!old) fail(ENOENT, `counter ${c.name} does not exist`);
      const refs = d.t.counterRefs.get(c.name) ?? 0;
      if (refs > 0) fail(EBUSY, `counter ${c.name} is still used by ${refs} rule(s)`);
      d.t.counters.delete(c.name);
      return;
    }
    default:
      invalid(`cannot ${verb} a counter`);
  }
}

function flushTable(d: TableDraft): void {
  for (const name of [...d.t.chains.keys()]) {
    const c = d.chain(name);
    for (const r of c.rules) releaseRule(d, r);
    c.rules = [];
  }
}

function chainOp(d: TableDraft, verb: Operation["verb"], c: Chain): void {
  checkName("chain", c.name);
  const old = d.t.chains.get(c.name);
  switch (verb) {
    case "add":
    case "create": {
      if (c.comment !== undefined) checkComment(c.comment);
      if ((c.type === undefined) !== (c.hook === undefined)) {
        invalid(`chain ${c.name}: a base chain needs both type and hook`);
      }
      if (old === undefined) {
        d.newChain({ chain: { ...c }, handle: d.t.nextHandle++, rules: [] });
        return;
      }
      if (verb === "create") fail(EEXIST, `chain ${c.name} exists`);
      if (!isBase(c)) return;
      const o = old.chain;
      if (!isBase(o)) fail(EEXIST, `chain ${c.name} exists as a regular chain`);
      if (o.type !== c.type) fail(EEXIST, `chain ${c.name} exists with type ${o.type}`);
      if (o.hook !== c.hook || (o.priority ?? 0) !== (c.priority ?? 0)) {
        fail(
          EOPNOTSUPP,
          `chain ${c.name} exists with hook ${o.hook} priority ${o.priority ?? 0}`,
        );
      }
      if (c.policy !== undefined && c.policy !== o.policy) {
        d.chain(c.name).chain = { ...o, policy: c.policy };
      }
      return;
    }
    case "flush": {
      const e = d.chain(c.name);
      for (const r of e.rules) releaseRule(d, r);
      e.rules = [];
      return;
    }
    case "delete": {
      // Counted before its own rules go: a chain that jumps to itself stays busy.
      const refs = d.t.chainRefs.get(c.name) ?? 0;
      if (refs > 0) {
        fail(
          EBUSY,
          `chain ${c.name} is still the target of ${refs} jump/goto(s) or map elements`,
        );
      }
      for (const r of d.chain(c.name).rules) releaseRule(d, r);
      d.t.chains.delete(c.name);
      return;
    }
    default:
      invalid(`cannot ${verb} a chain`);
  }
}

function ruleOp(d: TableDraft, verb: Operation["verb"], r: Rule): void {
  const c = d.chain(r.chain);
  const indexOf = (h: number | undefined, what: string): number => {
    if (h === undefined) invalid(`${what} needs a rule handle`);
    const i = c.rules.findIndex((x) => x.handle === h);
    if (i < 0) fail(ENOENT, `rule handle ${h} does not exist in chain ${r.chain}`);
    return i;
  };
  switch (verb) {
    case "add":
    case "create":
    case "insert": {
      const refs = analyseRule(r.rule, r.comment);
      const at = r.position === undefined
        ? (verb === "insert" ? 0 : c.rules.length)
        : indexOf(r.position, "position") + (verb === "insert" ? 0 : 1);
      holdRule(d, refs);
      d.t.nextHandle += refs.anonSets;
      const entry = { body: refs.body, comment: refs.comment, handle: d.t.nextHandle++, refs };
      c.rules.splice(at, 0, entry);
      return;
    }
    case "replace": {
      const i = indexOf(r.handle, "replace");
      const refs = analyseRule(r.rule, r.comment);
      releaseRule(d, c.rules[i]);
      holdRule(d, refs);
      d.t.nextHandle += refs.anonSets;
      c.rules[i] = { body: refs.body, comment: refs.comment, handle: c.rules[i].handle, refs };
      return;
    }
    case "delete": {
      const i = indexOf(r.handle, "delete");
      releaseRule(d, c.rules[i]);
      c.rules.splice(i, 1);
      return;
    }
    default:
      invalid(`cannot ${verb} a rule`);
  }
}

function setOp(d: TableDraft, verb: Operation["verb"], s: NftSet | NftMap): void {
  checkName(s.kind, s.name);
  const old = d.t.sets.get(s.name);
  switch (verb) {
    case "add":
    case "create": {
      if (s.comment !== undefined) checkComment(s.comment);
      const keyTypes = parseTypeList(s.type, `${s.kind} ${s.name} type`, false);
      const dataType = s.kind === "map" && s.type.startsWith("typeof ") && s.dataType !== "verdict"
        ? `typeof ${s.dataType}`
        : s.kind === "map"
        ? s.dataType
        : "";
      const valueTypes = s.kind === "map"
        ? parseTypeList(dataType, `map ${s.name} data type`, true)
        : undefined;
      for (const f of s.flags ?? []) {
        if (!["constant", "interval", "timeout", "dynamic"].includes(f)) {
          invalid(`${s.kind} ${s.name}: unknown flag "${f}"`);
        }
      }
      if (old === undefined) {
        d.newSet({
          def: { ...s },
          handle: d.t.nextHandle++,
          keyTypes,
          valueTypes,
          interval: (s.flags ?? []).includes("interval"),
          elements: new globalThis.Map(),
        });
        return;
      }
      if (verb === "create") fail(EEXIST, `${old.def.kind} ${s.name} exists`);
      const o = old.def;
      const same = o.kind === s.kind && normType(o.type) === normType(s.type) &&
        (o.kind !== "map" || s.kind !== "map" || normType(o.dataType) === normType(s.dataType)) &&
        sameFlags(o, s);
      if (!same) {
        fail(EEXIST, `${o.kind} ${s.name} exists with a different type or flags`);
      }
      // The kernel (6.x) takes the new default timeout, or none, from a re-add.
      if (o.timeout !== s.timeout) {
        const def = { ...o };
        if (s.timeout === undefined) delete def.timeout;
        else def.timeout = s.timeout;
        d.set(s.name).def = def;
      }
      return;
    }
    case "flush": {
      if (old === undefined || old.def.kind !== s.kind) {
        fail(ENOENT, `${s.kind} ${s.name} does not exist`);
      }
      const e = d.set(s.name);
      for (const el of e.elements.values()) releaseElement(d, el);
      e.elements = new globalThis.Map();
      return;
    }
    case "delete": {
      // The kernel deletes by name whatever the kind.
      if (old === undefined) fail(ENOENT, `${s.kind} ${s.name} does not exist`);
      const refs = d.t.setRefs.get(s.name) ?? 0;
      if (refs > 0) fail(EBUSY, `${old.def.kind} ${s.name} is still used by ${refs} rule(s)`);
      for (const el of old.elements.values()) releaseElement(d, el);
      d.t.sets.delete(s.name);
      return;
    }
    default:
      invalid(`cannot ${verb} a ${s.kind}`);
  }
}

function elementOp(d: TableDraft, verb: Operation["verb"], e: Element): void {
  const name = e.set ?? e.map;
  if (name === undefined) invalid("element needs a set or map name");
  if (d.t.sets.get(name) === undefined) fail(ENOENT, `set or map ${name} does not exist`);
  // nft 1.0.6 ignores a delete's comment and value (even wrong ones), but not a too long comment.
  if (e.comment !== undefined) checkComment(e.comment);
  const s = d.set(name);
  const key = parseParts(e.key, s.keyTypes, s.interval, "key", name);
  const k = key.map((p) => p.text).join(" . ");
  const existing = s.elements.get(k);
  switch (verb) {
    case "add":
    case "create": {
      let value: Part[] | undefined;
      if (s.valueTypes !== undefined) {
        if (e.value === undefined) invalid(`map ${name}: element ${k} needs a value`);
        value = parseParts(e.value, s.valueTypes, false, "value", name);
      } else if (e.value !== undefined) {
        invalid(`set ${name}: element ${k} cannot have a value (it is not a map)`);
      }
      const v = value?.map((p) => p.text).join(" . ");
      if (existing !== undefined) {
        if (verb === "create") fail(EEXIST, `element ${k} exists in ${name}`);
        const ov = existing.value?.map((p) => p.text).join(" . ");
        if (ov !== v) fail(EEXIST, `element ${k} exists in ${name} with value ${ov}`);
        return;
      }
      if (s.interval) checkOverlap(s, key);
      for (const p of value ?? []) {
        if (p.chain !== undefined) holdChain(d, p.chain);
      }
      s.elements.set(k, { key, value, comment: e.comment });
      return;
    }
    case "delete":
      if (existing === undefined) fail(ENOENT, `element ${k} does not exist in ${name}`);
      releaseElement(d, existing);
      s.elements.delete(k);
      return;
    default:
      invalid(`cannot ${verb} an element`);
  }
}
