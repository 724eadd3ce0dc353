/**
 * The localhost NodePort proxy (KEP-6032): one loopback listener per TCP NodePort of the
 * families it serves. It follows the sync engine: after each family's sync the engine hands
 * it the ids that changed ({@link LocalhostProxy.followSync}), and it reconciles its
 * listeners from the cluster state in a later task, never on the sync's path. Binding and
 * closing are synchronous and no client I/O is awaited here, so a slow client never holds a
 * sync up.
 *
 * @module
 */
import type { Logger } from "../log.ts";
import type { ProxyMetrics } from "../metrics.ts";
import { denoNet, type NetOps, NodePortListener } from "./listener.ts";
import type { PickerDeps } from "./picker.ts";
import { loopbackAddress } from "./selection.ts";
import { type ListenerTarget, listenerTarget } from "./targets.ts";
import type { FamilySync } from "../../proxier/cluster_state.ts";
import type { ProxyState } from "../../proxier/model.ts";
import { familyLabel, type IpFamily } from "../../net/family.ts";
import type { LogFn } from "../../net/log.ts";

/** Settings of a {@link LocalhostProxy}. */
export interface LocalhostProxyOptions {
  /** The families to serve (see selection.ts); an empty list makes an idle proxy. */
  families: readonly IpFamily[];
  /** Receives bind failures, listener changes and connection errors. */
  log: Logger;
  /** Connection and listener counters; none recorded when omitted. */
  metrics?: ProxyMetrics;
  /** Binds and dials; Deno's TCP by default. */
  net?: NetOps;
  /** Clock and randomness of the endpoint pickers. */
  picker?: PickerDeps;
  /** Runs the reconcile later; a zero timeout by default (off the sync's path). */
  schedule?: (fn: () => void) => void;
}

/** One family's bookkeeping. */
interface FamilyListeners {
  family: IpFamily;
  state?: ProxyState;
  /** Service port ids to look at again. */
  dirty: Set<string>;
  /** Listeners by NodePort. */
  byPort: Map<number, { id: string; listener: NodePortListener }>;
  /** The NodePort each id holds a listener on. */
  portOf: Map<string, number>;
  /** Ids whose bind failed: retried after every sync, as upstream does. */
  failed: Set<string>;
  /** Closed listeners whose connections may still be open (dropped by close()). */
  retired: Set<NodePortListener>;
}

/** The localhost NodePort proxy of one node. */
export class LocalhostProxy {
  readonly #o: LocalhostProxyOptions;
  readonly #net: NetOps;
  readonly #deps: PickerDeps;
  readonly #fams = new Map<IpFamily, FamilyListeners>();
  readonly #log: LogFn;
  #scheduled = false;
  #closed = false;

  /** An idle proxy: listeners appear with the first sync that has localhost NodePorts. */
  constructor(opts: LocalhostProxyOptions) {
    this.#o = opts;
    this.#net = opts.net ?? denoNet;
    this.#deps = opts.picker ?? { now: () => performance.now(), random: Math.random };
    this.#log = (level, msg, fields) => {
      if (level === "error") opts.log.error(msg, undefined, fields);
      else if (level === "warn") opts.log.warn(msg, fields);
      else opts.log.info(msg, fields, 4);
    };
    for (const family of opts.families) {
      const fl: FamilyListeners = {
        family,
        dirty: new Set(),
        byPort: new Map(),
        portOf: new Map(),
        failed: new Set(),
        retired: new Set(),
      };
      this.#fams.set(family, fl);
      opts.metrics?.localhostNodePortListeners.set({ ip_family: familyLabel(family) }, 0);
      opts.metrics?.localhostNodePortListenerCreationFailuresTotal.inc(
        { ip_family: familyLabel(family) },
        0,
      );
    }
  }

  /** The families served. */
  get families(): IpFamily[] {
    return [...this.#fams.keys()];
  }

  /** NodePorts with a listener now, by family (sorted). */
  listening(family: IpFamily): number[] {
    return [...(this.#fams.get(family)?.byPort.keys() ?? [])].sort((a, b) => a - b);
  }

  /** The listener on a NodePort, if any (tests read its picker). */
  listener(family: IpFamily, nodePort: number): NodePortListener | undefined {
    return this.#fams.get(family)?.byPort.get(nodePort)?.listener;
  }

  /** Records what a family's sync changed; the listeners follow in a later task. */
  followSync(family: IpFamily, sync: FamilySync, full: boolean): void {
    const fl = this.#fams.get(family);
    if (!fl || this.#closed) return;
    fl.state = sync.state;
    if (full) {
      for (const id of sync.state.services.keys()) fl.dirty.add(id);
      for (const id of fl.portOf.keys()) fl.dirty.add(id);
    }
    for (const id of sync.changed) fl.dirty.add(id);
    for (const id of sync.deleted) fl.dirty.add(id);
    for (const id of fl.failed) fl.dirty.add(id);
    if (fl.dirty.size === 0 || this.#scheduled) return;
    this.#scheduled = true;
    (this.#o.schedule ?? ((fn) => setTimeout(fn, 0)))(() => {
      this.#scheduled = false;
      this.reconcile();
    });
  }

  /** Brings every family's listeners in line with the ids recorded since the last call. */
  reconcile(): void {
    if (this.#closed) return;
    for (const fl of this.#fams.values()) {
      const ids = [...fl.dirty].sort();
      fl.dirty.clear();
      const targets = ids.map((id) => [id, this.#targetOf(fl, id)] as const);
      // Removals first, so a NodePort that moved between Services is free for its new owner.
      for (const [id, t] of targets) {
        const held = fl.portOf.get(id);
        if (held !== undefined && held !== t?.nodePort) this.#remove(fl, id, held);
        if (!t) fl.failed.delete(id);
      }
      for (const [id, t] of targets) if (t) this.#place(fl, id, t);
      for (const l of fl.retired) if (l.connections === 0) fl.retired.delete(l);
      this.#o.metrics?.localhostNodePortListeners.set(
        { ip_family: familyLabel(fl.family) },
        fl.byPort.size,
      );
    }
  }

  /** Closes every listener and every relayed connection (the agent is stopping). */
  close(): void {
    this.#closed = true;
    for (const fl of this.#fams.values()) {
      for (const { listener } of fl.byPort.values()) listener.close(true);
      for (const listener of fl.retired) listener.close(true);
      fl.byPort.clear();
      fl.retired.clear();
      fl.portOf.clear();
      this.#o.metrics?.localhostNodePortListeners.set({ ip_family: familyLabel(fl.family) }, 0);
    }
  }

  #targetOf(fl: FamilyListeners, id: string): ListenerTarget | undefined {
    const svc = fl.state?.services.get(id);
    return svc && listenerTarget(svc, fl.state!.endpoints.get(id), fl.state!.node);
  }

  /** Updates the id's listener, or binds one (a failure is logged, counted and retried). */
  #place(fl: FamilyListeners, id: string, target: ListenerTarget): void {
    const cur = fl.byPort.get(target.nodePort);
    if (cur && cur.id === id) return cur.listener.update(target);
    if (cur) {
      // NodePorts are unique per protocol, so this is a transient overlap: the first keeps it.
      fl.failed.add(id);
      return;
    }
    const host = loopbackAddress(fl.family);
    let ln;
    try {
      ln = this.#net.listen(host, target.nodePort);
    } catch (err) {
      fl.failed.add(id);
      this.#o.metrics?.localhostNodePortListenerCreationFailuresTotal.inc({
        ip_family: familyLabel(fl.family),
      });
      this.#o.log.error(
        "Failed to create localhost nodeport proxy; retrying after the next sync",
        err,
        {
          service: id,
          address: fl.family === 4 ? `${host}:${target.nodePort}` : `[${host}]:${target.nodePort}`,
          reason: (err as { code?: string }).code ?? String(err),
        },
      );
      return;
    }
    fl.failed.delete(id);
    const listener = new NodePortListener(ln, target, this.#net, this.#log, this.#deps);
    fl.byPort.set(target.nodePort, { id, listener });
    fl.portOf.set(id, target.nodePort);
    this.#o.log.info("Created localhost nodeport proxy", {
      service: id,
      ipFamily: familyLabel(fl.family),
      port: target.nodePort,
      endpoints: target.backends.length,
    }, 2);
  }

  #remove(fl: FamilyListeners, id: string, port: number): void {
    const cur = fl.byPort.get(port);
    if (cur?.id === id) {
      cur.listener.close();
      fl.retired.add(cur.listener);
      fl.byPort.delete(port);
      this.#o.log.info("Removed localhost nodeport proxy", {
        service: id,
        ipFamily: familyLabel(fl.family),
        port,
      }, 2);
    }
    fl.portOf.delete(id);
  }
}
