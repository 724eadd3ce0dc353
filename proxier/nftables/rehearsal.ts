/**
 * A rehearsal of the partial path, run once after the first full sync: a
 * few pretend changes are planned against the written state and encoded as
 * the client would send them, and nothing is sent or committed.
 *
 * Why: a cold start runs only the full path. Without this, the first real
 * change after start-up is where V8 first compiles the partial planner, the
 * frontend diff and the element encoder. At 10k Services (docs/benchmarks.md)
 * its watch event reached the kernel in 9-11 ms without a rehearsal and in
 * 5-7 ms with one; later changes take 3-5 ms. A rehearsal costs ~20 ms once,
 * off the path of any change.
 *
 * @module
 */
import type { NftablesClient } from "../../ffi/nftables/types.ts";
import type { EndpointInfo, ProxyState } from "../model.ts";
import type { BuildContext } from "./context.ts";
import { planPartial } from "./plan/partial.ts";
import { buildServiceRules, type ServiceRules } from "./service_rules.ts";
import type { WrittenState } from "./written_state.ts";

/** How many service ports a rehearsal pretends to change, each in its own plan. */
const REHEARSED_PORTS = 16;

/** What a rehearsal did. */
export interface RehearsalResult {
  /** Plans made (one per pretend change). */
  plans: number;
  /** Operations those plans held (none sent). */
  ops: number;
  /** Transactions the client encoded (those it would send as raw netlink batches). */
  encoded: number;
}

/**
 * Plans and encodes pretend changes of up to {@link REHEARSED_PORTS} service
 * ports of `state` that `written` holds: each loses one endpoint (or, with
 * one, its only one), and the last one is also planned as deleted. Pure
 * towards the proxier: `written` is only read (each plan's delta is
 * dropped), and `client.rehearse` sends nothing. Needs a full sync's
 * written state; with nothing to rehearse it plans nothing.
 */
export function rehearse(
  written: WrittenState,
  state: ProxyState,
  ctx: BuildContext,
  client: Pick<NftablesClient, "rehearse">,
  now: number,
): RehearsalResult {
  const result: RehearsalResult = { plans: 0, ops: 0, encoded: 0 };
  if (written.gen === undefined || client.rehearse === undefined) return result;
  const rulesOf = (id: string): ServiceRules | undefined => {
    const svc = state.services.get(id);
    return svc === undefined
      ? undefined
      : buildServiceRules(svc, state.endpoints.get(id) ?? [], ctx);
  };
  const picked = pick(written, state);
  for (const [i, id] of picked.entries()) {
    const eps = state.endpoints.get(id) ?? [];
    const fewer: readonly EndpointInfo[] = eps.length > 1 ? eps.slice(1) : [];
    const pretend = buildServiceRules(state.services.get(id)!, fewer, ctx);
    const changes: Map<string, ServiceRules | null>[] = [new Map([[id, pretend]])];
    if (i === picked.length - 1) changes.push(new Map([[id, null]]));
    for (const change of changes) {
      const plan = planPartial(written, { ctx, changes: change, rulesOf, now });
      result.plans++;
      // The delta (the generator's return value) is dropped: nothing is committed.
      for (let next = plan.next(); !next.done; next = plan.next()) {
        if (client.rehearse(next.value)) result.encoded++;
        result.ops += next.value.size;
      }
    }
  }
  return result;
}

/** Service ports with endpoints that the written state holds, in its order. */
function pick(written: WrittenState, state: ProxyState): string[] {
  const out: string[] = [];
  for (const id of written.services.keys()) {
    if (out.length === REHEARSED_PORTS) break;
    if (state.services.has(id) && (state.endpoints.get(id)?.length ?? 0) > 0) out.push(id);
  }
  return out;
}
