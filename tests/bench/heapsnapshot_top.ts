/**
 * Where a V8 heap snapshot's bytes are (what SIGUSR2 writes with KUBE_NFT_PROXY_HEAP_SNAPSHOT_DIR
 * set, agent/heap_snapshot.ts), as text: self size grouped by kind of object, for
 * docs/benchmarks.md and for deciding what to shrink. Plain objects are grouped by their property
 * names (the shape), strings by a pattern of their text (digits as `#`), so that "300k endpoint
 * objects" or "30k frontend specs" show up as one line each.
 *
 * Usage: deno run -R --v8-flags=--max-old-space-size=8000 tests/bench/heapsnapshot_top.ts FILE
 *        [--top=N] [--strings]
 * - `--strings`: group the strings alone, by pattern (an example of each is printed).
 *
 * @module
 */

/** The parts of a `.heapsnapshot` read here. */
interface HeapSnapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[], ...unknown[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** One group: how many nodes and their self size in bytes, with an example. */
export interface Group {
  count: number;
  bytes: number;
  example: string;
}

const STRING_TYPES = new Set(["string", "concatenated string", "sliced string"]);

/** The group key of a string: its kind and text with digit runs as `#`, and a length bucket. */
export function stringPattern(kind: string, text: string): string {
  const short = text.replace(/[0-9]+/g, "#").slice(0, 60);
  return `${kind}: ${JSON.stringify(short)} (~${Math.ceil(text.length / 10) * 10} chars)`;
}

/** Self sizes of `snap` grouped by kind (objects by shape), or its strings alone by pattern. */
export function groupSnapshot(snap: HeapSnapshot, stringsOnly: boolean): Map<string, Group> {
  const { meta } = snap.snapshot;
  const nf = meta.node_fields, ef = meta.edge_fields;
  const types = meta.node_types[0], edgeTypes = meta.edge_types[0];
  const N = nf.length, E = ef.length;
  const iType = nf.indexOf("type"), iName = nf.indexOf("name");
  const iSize = nf.indexOf("self_size"), iEdges = nf.indexOf("edge_count");
  const eType = ef.indexOf("type"), eName = ef.indexOf("name_or_index");
  const { nodes, edges, strings } = snap;
  const out = new Map<string, Group>();
  let edge = 0;
  for (let i = 0; i < nodes.length; i += N) {
    const kind = types[nodes[i + iType]];
    const name = strings[nodes[i + iName]] ?? "";
    const edgeCount = nodes[i + iEdges];
    let key: string | undefined;
    if (STRING_TYPES.has(kind)) key = stringsOnly ? stringPattern(kind, name) : kind;
    else if (!stringsOnly && kind === "object" && name === "Object") {
      const props: string[] = [];
      for (let k = 0; k < edgeCount && props.length < 8; k++) {
        const b = (edge + k) * E;
        if (edgeTypes[edges[b + eType]] === "property") props.push(strings[edges[b + eName]]);
      }
      key = `object {${props.join(", ")}}`;
    } else if (!stringsOnly) key = `${kind} ${name.slice(0, 40)}`;
    edge += edgeCount;
    if (key === undefined) continue;
    const g = out.get(key) ?? { count: 0, bytes: 0, example: name.slice(0, 80) };
    g.count++;
    g.bytes += nodes[i + iSize];
    out.set(key, g);
  }
  return out;
}

if (import.meta.main) {
  const file = Deno.args.find((a) => !a.startsWith("--"));
  if (file === undefined) {
    console.error("usage: heapsnapshot_top.ts FILE [--top=N] [--strings]");
    Deno.exit(2);
  }
  const top = Number(Deno.args.find((a) => a.startsWith("--top="))?.slice(6) ?? 30);
  const stringsOnly = Deno.args.includes("--strings");
  const snap = JSON.parse(Deno.readTextFileSync(file)) as HeapSnapshot;
  const groups = groupSnapshot(snap, stringsOnly);
  const total = [...groups.values()].reduce((s, g) => s + g.bytes, 0);
  console.log(`${(total / 1e6).toFixed(1)} MB in ${stringsOnly ? "strings" : "all nodes"}`);
  const rows = [...groups].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top);
  for (const [key, g] of rows) {
    const ex = stringsOnly ? `  e.g. ${JSON.stringify(g.example.slice(0, 50))}` : "";
    console.log(
      `${(g.bytes / 1e6).toFixed(2).padStart(7)} MB ${String(g.count).padStart(8)}  ${key}${ex}`,
    );
  }
}
