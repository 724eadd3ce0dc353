import assert from "node:assert/strict";
import { groupSnapshot, stringPattern } from "./heapsnapshot_top.ts";

/** A snapshot of two `{ip, port}` objects, each pointing at an address string. */
function tinySnapshot() {
  const types = ["hidden", "object", "string"];
  const strings = ["Object", "ip", "port", "198.18.0.1", "198.18.0.2"];
  // node: type, name, id, self_size, edge_count
  const nodes = [1, 0, 1, 40, 2, 1, 0, 2, 40, 2, 2, 3, 3, 32, 0, 2, 4, 4, 32, 0];
  // edge: type (0 property), name, to_node (index into nodes)
  const edges = [0, 1, 10, 0, 2, 0, 0, 1, 15, 0, 2, 0];
  return {
    snapshot: {
      meta: {
        node_fields: ["type", "name", "id", "self_size", "edge_count"],
        node_types: [types] as [string[]],
        edge_fields: ["type", "name_or_index", "to_node"],
        edge_types: [["property", "element"]] as [string[]],
      },
    },
    nodes,
    edges,
    strings,
  };
}

Deno.test("heap snapshot top: plain objects grouped by their properties, strings by kind", () => {
  const g = groupSnapshot(tinySnapshot(), false);
  assert.deepEqual(g.get("object {ip, port}"), { count: 2, bytes: 80, example: "Object" });
  assert.equal(g.get("string")?.bytes, 64);
});

Deno.test("heap snapshot top: strings grouped by the pattern of their text", () => {
  const g = groupSnapshot(tinySnapshot(), true);
  assert.equal(g.size, 1);
  const [key, group] = [...g][0];
  assert.equal(key, stringPattern("string", "198.18.0.1"));
  assert.equal(key, 'string: "#.#.#.#" (~10 chars)');
  assert.equal(group.count, 2);
});
