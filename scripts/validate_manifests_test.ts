import assert from "node:assert/strict";
import YAML from "yaml";
import { validateManifests } from "./validate_manifests.ts";

function load(): Record<string, unknown>[] {
  const dir = new URL("../deploy/kubernetes/", import.meta.url).pathname;
  return [...Deno.readDirSync(dir)].filter((e) => e.name.endsWith(".yaml"))
    .flatMap((e) =>
      YAML.parseAllDocuments(Deno.readTextFileSync(dir + e.name)).map((d) => d.toJS())
    );
}

Deno.test("shipped manifests are valid", () => {
  assert.deepEqual(validateManifests(load()), []);
});

Deno.test("a DaemonSet whose selector misses its labels is caught", () => {
  const docs = load();
  const ds = docs.find((d) => d.kind === "DaemonSet") as {
    spec: { selector: { matchLabels: Record<string, string> } };
  };
  ds.spec.selector.matchLabels = { app: "other" };
  assert.ok(validateManifests(docs).some((e) => e.includes("does not match template")));
});

Deno.test("RBAC without endpointslices watch is caught", () => {
  const docs = load().map((d) =>
    d.kind === "ClusterRole"
      ? {
        ...d,
        rules: (d.rules as { resources: string[] }[]).filter((r) =>
          !r.resources.includes("endpointslices")
        ),
      }
      : d
  );
  assert.ok(validateManifests(docs).some((e) => e.includes("discovery.k8s.io/endpointslices")));
});
