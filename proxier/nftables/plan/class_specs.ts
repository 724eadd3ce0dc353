/**
 * A class chain's set and chain as a build context writes them, with their
 * digests, made once per context. Settling the classes (common.ts) compares
 * every class with the written state whenever a change moves a frontend
 * between classes, about a hundred of them at 30k Services; building and
 * digesting each every time cost ~80 us of such a change.
 *
 * @module
 */
import type { Set as NftSet } from "../../../ffi/nftables/types.ts";
import type { BuildContext } from "../context.ts";
import { classNeighbours, parseClassChain } from "../names.ts";
import { type ChainSpec, classChain, classSet } from "../skeleton.ts";

/** A class's objects and their digests, as {@link classSpec} returns them (never modify). */
export interface ClassSpec {
  /** The class's frontends set. */
  readonly set: Readonly<NftSet>;
  /** The set's digest, as the written state keeps it. */
  readonly setDigest: string;
  /** The class chain. */
  readonly chain: Readonly<ChainSpec>;
  /** The chain's digest, as the written state keeps it. */
  readonly chainDigest: string;
}

const specs = new WeakMap<BuildContext, Map<string, ClassSpec>>();
const neighbours = new Map<string, readonly string[]>();
/** Class names are few (kinds × protocols × counts in use): a bound for a long-lived process. */
const MAX_CACHED = 4096;

/**
 * The set and chain of class chain `name` (of generation `gen`) under `ctx`.
 * `digests` are the written state's (common.ts `setDigest`, `chainDigest`).
 */
export function classSpec(
  ctx: BuildContext,
  name: string,
  gen: number,
  digests: { set: (s: NftSet) => string; chain: (c: ChainSpec) => string },
): ClassSpec {
  let byName = specs.get(ctx);
  if (byName === undefined) specs.set(ctx, byName = new Map());
  const key = `${gen}:${name}`;
  let spec = byName.get(key);
  if (spec === undefined) {
    const c = parseClassChain(name);
    if (c === undefined) throw new Error(`${name} is not a class chain`);
    const set = classSet(ctx, name), chain = classChain(ctx, c.kind, c.proto, c.n, gen);
    spec = { set, setDigest: digests.set(set), chain, chainDigest: digests.chain(chain) };
    if (byName.size >= MAX_CACHED) byName.clear();
    byName.set(key, spec);
  }
  return spec;
}

/** names.ts `classNeighbours`, remembered. */
export function cachedNeighbours(name: string, gen: number): readonly string[] {
  const key = `${gen}:${name}`;
  let out = neighbours.get(key);
  if (out === undefined) {
    out = classNeighbours(name, gen);
    if (neighbours.size >= MAX_CACHED) neighbours.clear();
    neighbours.set(key, out);
  }
  return out;
}
