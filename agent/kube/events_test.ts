import assert from "node:assert/strict";
import { FakeApiServer } from "../../tests/fakeapi/server.ts";
import { ApiFetch } from "./api_fetch.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { nodeEvent, postNodeEvent, postStartingEvent, startingEvent } from "./events.ts";
import { Logger } from "../log.ts";

Deno.test("the start-up Event is upstream's: reason Starting, action StartKubeProxy, the Node", () => {
  const e = startingEvent("node-a", new Date("2026-11-25T04:00:00.123Z"));
  assert.equal(e.reason, "Starting");
  assert.equal(e.action, "StartKubeProxy");
  assert.equal(e.reportingController, "kube-proxy");
  assert.equal(e.eventTime, "2026-11-25T04:00:00.123000Z");
  assert.deepEqual(e.regarding, { kind: "Node", name: "node-a", uid: "node-a" });
  assert.match((e.metadata as { name: string }).name, /^node-a\.[0-9a-f]+$/);
});

Deno.test("postStartingEvent posts to the API server; a refusal is only a warning", async () => {
  const api = FakeApiServer.start();
  const lines: string[] = [];
  const log = new Logger({
    verbosity: 0,
    sink: { out: (l) => lines.push(l), err: (l) => lines.push(l) },
  });
  try {
    const fetcher = new ApiFetch(kubeConfigFromString(api.kubeconfigYaml()).creds);
    await postStartingEvent(fetcher, "node-a", log);
    assert.equal(api.events.length, 1);
    assert.equal(api.events[0].metadata?.namespace, "default");
    api.failNext(1, 403);
    await postStartingEvent(fetcher, "node-a", log);
    assert.equal(api.events.length, 1);
    assert.match(lines.join("\n"), /Could not record the Starting Event.*status=403/);
  } finally {
    await api.close();
  }
});

Deno.test("a server that cannot bind is reported as upstream's Warning event", async () => {
  const e = nodeEvent(
    "node-a",
    {
      type: "Warning",
      reason: "FailedToStartProxierHealthcheck",
      action: "StartKubeProxy",
      note: "listen tcp 0.0.0.0:10256: bind: address already in use",
    },
    new Date(0),
    "host-a",
  );
  assert.equal(e.type, "Warning");
  assert.equal(e.reportingInstance, "kube-proxy-host-a");
  const api = FakeApiServer.start();
  try {
    const { creds } = kubeConfigFromString(api.kubeconfigYaml());
    const log = new Logger({ sink: { out: () => {}, err: () => {} } });
    await postNodeEvent(new ApiFetch(creds), "node-a", {
      type: "Warning",
      reason: "FailedToStartMetricServer",
      action: "StartKubeProxy",
      note: "boom",
    }, log);
    assert.equal(api.events[0].reason, "FailedToStartMetricServer");
    assert.equal(api.events[0].note, "boom");
  } finally {
    await api.close();
  }
});
