import assert from "node:assert/strict";
import {
  guardNodeHandlers,
  type NodeExit,
  NodeLifecycle,
  upstreamNodeIPs,
} from "./node_lifecycle.ts";
import type { ProxyInformerHandlers } from "./kube/informers.ts";
import type { V1Node } from "../proxier/k8s_types.ts";

function node(...addrs: [string, string][]): V1Node {
  return {
    metadata: { name: "n1" },
    status: { addresses: addrs.map(([type, address]) => ({ type, address })) },
  };
}

const V4 = node(["InternalIP", "198.18.0.2"], ["InternalIP", "2001:db8::2"]);

Deno.test("upstreamNodeIPs: GetNodeHostIPs' pick (first, then the first of the other family)", () => {
  assert.deepEqual(upstreamNodeIPs(V4), ["198.18.0.2", "2001:db8::2"]);
  assert.deepEqual(
    upstreamNodeIPs(node(["InternalIP", "198.18.0.2"], ["InternalIP", "198.18.0.3"])),
    ["198.18.0.2"],
  );
  // ExternalIPs come after every InternalIP, and may supply the other family.
  assert.deepEqual(
    upstreamNodeIPs(node(["ExternalIP", "2001:db8::9"], ["InternalIP", "198.18.0.2"])),
    ["198.18.0.2", "2001:db8::9"],
  );
  assert.deepEqual(upstreamNodeIPs(node(["Hostname", "n1"], ["InternalIP", "nope"])), []);
  assert.deepEqual(upstreamNodeIPs(undefined), []);
});

Deno.test("NodeLifecycle: same IPs survive; a changed IP exits naming old and new", () => {
  const l = new NodeLifecycle("n1", V4);
  assert.equal(l.changed(V4), undefined);
  // A third address does not change upstream's pick.
  assert.equal(
    l.changed(node(["InternalIP", "198.18.0.2"], ["InternalIP", "2001:db8::2"], [
      "InternalIP",
      "198.18.0.7",
    ])),
    undefined,
  );
  const v = l.changed(node(["InternalIP", "198.18.0.5"], ["InternalIP", "2001:db8::2"]));
  assert.ok(v && v !== "no-ips");
  assert.deepEqual(v.fields, {
    node: "n1",
    oldNodeIPs: "198.18.0.2,2001:db8::2",
    newNodeIPs: "198.18.0.5,2001:db8::2",
  });
  assert.equal(v.event.type, "Warning");
  assert.equal(v.event.reason, "NodeIPsChanged");
  assert.match(v.event.note, /from 198\.18\.0\.2,2001:db8::2 to 198\.18\.0\.5,2001:db8::2/);
});

Deno.test("NodeLifecycle: losing the IPs is logged, not an exit; getting them back exits", () => {
  const l = new NodeLifecycle("n1", V4);
  assert.equal(l.changed(node(["Hostname", "n1"])), "no-ips");
  // As upstream: the IP-less Node is kept, so the next Node with IPs differs from none.
  const v = l.changed(V4);
  assert.ok(v && v !== "no-ips");
  assert.equal(v.fields.oldNodeIPs, "");
});

Deno.test("NodeLifecycle: a family added (single to dual stack) exits", () => {
  const l = new NodeLifecycle("n1", node(["InternalIP", "198.18.0.2"]));
  const v = l.changed(V4);
  assert.ok(v && v !== "no-ips");
  assert.equal(v.fields.newNodeIPs, "198.18.0.2,2001:db8::2");
});

Deno.test("NodeLifecycle: deletion always exits with a Warning NodeDeleted", () => {
  const v = new NodeLifecycle("n1", V4).deleted();
  assert.equal(v.event.reason, "NodeDeleted");
  assert.equal(v.event.type, "Warning");
  assert.match(v.message, /Node is being deleted/);
});

function recorder() {
  const seen: string[] = [];
  const h = (kind: string) => ({
    onAdd: () => seen.push(`${kind}:add`),
    onUpdate: () => seen.push(`${kind}:update`),
    onDelete: () => seen.push(`${kind}:delete`),
    onSynced: () => seen.push(`${kind}:synced`),
  });
  const handlers: Required<ProxyInformerHandlers> = {
    services: h("svc"),
    endpointSlices: h("eps"),
    node: h("node"),
    serviceCIDRs: h("cidr"),
  };
  return { seen, handlers };
}

Deno.test("guardNodeHandlers: survivable events reach the engine; the exiting one does not, once", () => {
  const { seen, handlers } = recorder();
  const exits: NodeExit[] = [];
  const noIPs: V1Node[] = [];
  const g = guardNodeHandlers(handlers, new NodeLifecycle("n1", V4), {
    noIPs: (n) => noIPs.push(n),
    exit: (w) => exits.push(w),
  });
  assert.equal(g.services, handlers.services);
  g.node.onAdd(V4);
  g.node.onUpdate(V4, node(["Hostname", "n1"]));
  assert.equal(noIPs.length, 1);
  const moved = node(["InternalIP", "198.18.0.9"]);
  g.node.onUpdate(V4, moved);
  g.node.onUpdate(moved, V4);
  g.node.onDelete(V4);
  g.node.onSynced!();
  assert.deepEqual(seen, ["node:add", "node:update", "node:synced"]);
  assert.equal(exits.length, 1);
  assert.equal(exits[0].event.reason, "NodeIPsChanged");
});

Deno.test("guardNodeHandlers: a deletion exits and the engine keeps its Node (rules stay)", () => {
  const { seen, handlers } = recorder();
  const exits: NodeExit[] = [];
  const g = guardNodeHandlers(handlers, new NodeLifecycle("n1", V4), {
    noIPs: () => {},
    exit: (w) => exits.push(w),
  });
  g.node.onDelete(V4);
  assert.deepEqual(seen, []);
  assert.deepEqual(exits.map((e) => e.event.reason), ["NodeDeleted"]);
});
