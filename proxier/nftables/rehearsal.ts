/**
 * A rehearsal of the partial path, run after the first full sync and again
 * after each memory trim (`Proxier.warmUp`): a few pretend changes are
 * planned against the written state and encoded as the client would send
 * them, and nothing is sent or committed.
 *
 * Why: a cold start runs only the full path. Without this, the first real
 * change after start-up is where V8 first compiles the partial planner, the
 * frontend diff and the element encoder. At 10k Services (docs/benchmarks.md)
 * its watch event reached the kernel in 9-11 ms without a rehearsal and in
 * 5-7 ms with one; later changes take 3-5 ms. A trim then hands back the
 * pages that path used, and the next change faulted them in again (~300
 * faults at 10k, eleventh round), so the rehearsal follows the last trim. It
 * costs ~15-20 ms each time, off the path of any change.
 *
 * @module
 */
import type { NftablesClient } from "../../ffi/nftables/types.ts";
import type { EndpointInfo, ProxyState, ServicePortInfo } from "../model.ts";
import type { BuildContext } from "./context.ts";
import { planPartial } from "./plan/partial.ts";
import { buildServiceRules, portRules, type ServiceRules } from "./service_rules.ts";
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
 * ports of `state` that `written` holds: every other one loses one endpoint,
 * the others are scaled to one (with one, each loses its only one), the last
 * one is also planned as deleted, and a copy of the first on an address no
 * Service has is planned as a new port. Pure towards the proxier: `written`
 * is only read (each plan's delta is dropped), and `client.rehearse` sends
 * nothing. Needs a full sync's written state; with nothing to rehearse it
 * plans nothing.
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
  const rulesOf = (id: string) => portRules(state, id, ctx);
  for (const change of pretendChanges(written, state, ctx)) {
    const plan = planPartial(written, { ctx, changes: change, rulesOf, now });
    result.plans++;
    // The delta (the generator's return value) is dropped: nothing is committed.
    for (let next = plan.next(); !next.done; next = plan.next()) {
      if (client.rehearse(next.value)) result.encoded++;
      result.ops += next.value.size;
    }
  }
  return result;
}

/** The pretend changes of {@link rehearse}, one plan's worth each. */
function pretendChanges(
  written: WrittenState,
  state: ProxyState,
  ctx: BuildContext,
): Map<string, ServiceRules | null>[] {
  const picked = pick(written, state);
  const out: Map<string, ServiceRules | null>[] = [];
  picked.forEach((id, k) => {
    const eps = state.endpoints.get(id) ?? [];
    // Half lose one endpoint, half are scaled to one (a class move, its buckets deleted).
    const fewer: readonly EndpointInfo[] = k % 2 === 1 && eps.length > 1
      ? eps.slice(-1)
      : eps.slice(1);
    out.push(new Map([[id, buildServiceRules(state.services.get(id)!, fewer, ctx)]]));
  });
  if (picked.length > 0) {
    out.push(new Map([[picked.at(-1)!, null]]));
    const svc = state.services.get(picked[0])!;
    // No Service is in an empty namespace nor on the unspecified address: nothing collides.
    const copy: ServicePortInfo = {
      ...svc,
      id: "/rehearsal:",
      namespace: "",
      name: "rehearsal",
      clusterIP: svc.family === 4 ? "0.0.0.0" : "::",
      nodePort: 0,
      externalIPs: [],
      loadBalancerIPs: [],
      healthCheckNodePort: 0,
    };
    out.push(new Map([[copy.id, buildServiceRules(copy, state.endpoints.get(picked[0])!, ctx)]]));
  }
  return out;
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
