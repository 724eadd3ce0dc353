import assert from "node:assert/strict";
import {
  dropRepeatedElements,
  LISTING_ATTEMPTS,
  readWholeListing,
  tornListingsSeen,
} from "./torn_listing.ts";
import type { Element, TableState } from "./types.ts";

const el = (ip: string, value?: string): Element => ({
  kind: "element",
  map: "m",
  key: [ip, "tcp", "80"],
  ...(value !== undefined ? { value: [value] } : {}),
});

/** A table with map m holding `keys` (a listing "text" is the keys, comma-separated). */
function parse(text: string): TableState {
  const keys = text === "" ? [] : text.split(",");
  return {
    family: "ip",
    name: "t",
    chains: new Map(),
    sets: new Map(),
    maps: new Map([[
      "m",
      {
        map: {
          kind: "map",
          name: "m",
          type: "ipv4_addr . inet_proto . inet_service",
          dataType: "verdict",
        },
        elements: keys.map((k) => el(k, "goto c")),
      },
    ]]),
  };
}

const keysOf = (st: TableState | null) => st?.maps.get("m")?.elements.map((e) => e.key[0]);

Deno.test("dropRepeatedElements: keeps the first of each key, in order", () => {
  const st = parse("198.18.0.1,198.18.0.2,198.18.0.1,198.18.0.3,198.18.0.2");
  assert.equal(dropRepeatedElements(st), 2);
  assert.deepEqual(keysOf(st), ["198.18.0.1", "198.18.0.2", "198.18.0.3"]);
  assert.equal(dropRepeatedElements(st), 0);
});

Deno.test("dropRepeatedElements: the same address under another port is another key", () => {
  const st = parse("198.18.0.1");
  st.maps.get("m")!.elements.push({ ...el("198.18.0.1"), key: ["198.18.0.1", "tcp", "81"] });
  assert.equal(dropRepeatedElements(st), 0);
});

/** A reader that hands out `texts` in turn, counting reads. */
function scripted(texts: (string | null)[]) {
  let reads = 0;
  return { read: () => Promise.resolve(texts[reads++] ?? null), reads: () => reads };
}

Deno.test("readWholeListing: a torn listing is read again; the whole one is kept", async () => {
  const before = tornListingsSeen();
  const r = scripted(["198.18.0.1,198.18.0.1", "198.18.0.1,198.18.0.2"]);
  const st = await readWholeListing(r.read, parse);
  assert.equal(r.reads(), 2);
  assert.deepEqual(keysOf(st), ["198.18.0.1", "198.18.0.2"]);
  assert.equal(tornListingsSeen() - before, 1);
});

Deno.test("readWholeListing: torn every time, the last read loses its repeats", async () => {
  const r = scripted(Array(LISTING_ATTEMPTS + 1).fill("198.18.0.1,198.18.0.2,198.18.0.1"));
  const st = await readWholeListing(r.read, parse);
  assert.equal(r.reads(), LISTING_ATTEMPTS);
  assert.deepEqual(keysOf(st), ["198.18.0.1", "198.18.0.2"]);
});

Deno.test("readWholeListing: a whole listing is read once; a missing object is null", async () => {
  const whole = scripted(["198.18.0.1,198.18.0.2"]);
  assert.deepEqual(keysOf(await readWholeListing(whole.read, parse)), ["198.18.0.1", "198.18.0.2"]);
  assert.equal(whole.reads(), 1);
  const missing = scripted([null]);
  assert.equal(await readWholeListing(missing.read, parse), null);
  assert.equal(missing.reads(), 1);
});
