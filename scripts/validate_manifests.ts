/**
 * Offline schema check of deploy/kubernetes: every document parses, carries
 * apiVersion/kind/metadata, and the fields the DaemonSet and RBAC rely on are
 * consistent (selector vs labels, probe ports, the permissions the agent uses).
 * `kubectl --dry-run=client` needs API discovery, so CI uses this instead.
 *
 * @module
 */
import YAML from "yaml";

type Obj = Record<string, unknown>;

/** Problems found in the given manifests; empty when they are valid. */
export function validateManifests(docs: Obj[]): string[] {
  const errs: string[] = [];
  const byKind = new Map<string, Obj[]>();
  for (const d of docs) {
    const kind = d.kind as string | undefined;
    const meta = d.metadata as Obj | undefined;
    if (typeof d.apiVersion !== "string" || typeof kind !== "string" || !meta?.name) {
      errs.push(
        `document without apiVersion/kind/metadata.name: ${JSON.stringify(d).slice(0, 80)}`,
      );
      continue;
    }
    byKind.set(kind, [...(byKind.get(kind) ?? []), d]);
  }
  const need = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"];
  for (const k of need) if (!byKind.has(k)) errs.push(`missing a ${k}`);

  for (const ds of byKind.get("DaemonSet") ?? []) errs.push(...checkDaemonSet(ds, byKind));
  for (const role of byKind.get("ClusterRole") ?? []) errs.push(...checkRole(role));
  for (const cm of byKind.get("ConfigMap") ?? []) {
    const data = cm.data as Record<string, string> | undefined;
    for (const [key, text] of Object.entries(data ?? {})) {
      const cfg = YAML.parse(text) as Obj;
      if (cfg?.kind !== "KubeProxyConfiguration") continue;
      if (cfg.apiVersion !== "kubeproxy.config.k8s.io/v1alpha1") {
        errs.push(`ConfigMap ${key}: apiVersion must be kubeproxy.config.k8s.io/v1alpha1`);
      }
      if (cfg.mode !== undefined && cfg.mode !== "nftables") {
        errs.push(`ConfigMap ${key}: mode must be nftables`);
      }
    }
  }
  return errs;
}

function checkDaemonSet(ds: Obj, byKind: Map<string, Obj[]>): string[] {
  const errs: string[] = [];
  const name = (ds.metadata as Obj).name;
  if (ds.apiVersion !== "apps/v1") errs.push(`DaemonSet ${name}: apiVersion must be apps/v1`);
  const spec = ds.spec as Obj;
  const sel = ((spec?.selector as Obj)?.matchLabels ?? {}) as Record<string, string>;
  const tmpl = spec?.template as Obj;
  const labels = ((tmpl?.metadata as Obj)?.labels ?? {}) as Record<string, string>;
  if (Object.keys(sel).length === 0) errs.push(`DaemonSet ${name}: no selector.matchLabels`);
  for (const [k, v] of Object.entries(sel)) {
    if (labels[k] !== v) errs.push(`DaemonSet ${name}: selector ${k}=${v} does not match template`);
  }
  const pod = tmpl?.spec as Obj;
  if (pod?.hostNetwork !== true) errs.push(`DaemonSet ${name}: needs hostNetwork: true`);
  const sa = pod?.serviceAccountName;
  const sas = (byKind.get("ServiceAccount") ?? []).map((s) => (s.metadata as Obj).name);
  if (!sas.includes(sa)) errs.push(`DaemonSet ${name}: serviceAccountName ${sa} is not defined`);
  const containers = (pod?.containers ?? []) as Obj[];
  if (containers.length === 0) errs.push(`DaemonSet ${name}: no containers`);
  const volumes = new Set(((pod?.volumes ?? []) as Obj[]).map((v) => v.name));
  for (const c of containers) {
    if (typeof c.image !== "string" || c.image === "") errs.push(`container ${c.name}: no image`);
    const caps = ((c.securityContext as Obj)?.capabilities as Obj)?.add as string[] | undefined;
    if (!(c.securityContext as Obj)?.privileged && !caps?.includes("NET_ADMIN")) {
      errs.push(`container ${c.name}: needs NET_ADMIN (or privileged)`);
    }
    for (const [probe, path] of [["livenessProbe", "/livez"], ["readinessProbe", "/healthz"]]) {
      const get = (c[probe] as Obj)?.httpGet as Obj | undefined;
      if (get?.path !== path) errs.push(`container ${c.name}: ${probe} must GET ${path}`);
      if (get?.port !== 10256) errs.push(`container ${c.name}: ${probe} must use port 10256`);
    }
    for (const m of (c.volumeMounts ?? []) as Obj[]) {
      if (!volumes.has(m.name)) errs.push(`container ${c.name}: mount ${m.name} has no volume`);
    }
    if (!((c.resources as Obj)?.requests)) errs.push(`container ${c.name}: no resource requests`);
  }
  const tol = (pod?.tolerations ?? []) as Obj[];
  if (!tol.some((t) => t.operator === "Exists" && t.key === undefined)) {
    errs.push(`DaemonSet ${name}: must tolerate every taint (operator: Exists), like kube-proxy`);
  }
  return errs;
}

function checkRole(role: Obj): string[] {
  const rules = (role.rules ?? []) as Obj[];
  const allowed = (group: string, res: string, verb: string) =>
    rules.some((r) =>
      (r.apiGroups as string[]).includes(group) && (r.resources as string[]).includes(res) &&
      (r.verbs as string[]).includes(verb)
    );
  const errs: string[] = [];
  const need: [string, string, string[]][] = [
    ["", "services", ["list", "watch"]],
    ["", "nodes", ["list", "watch"]],
    ["discovery.k8s.io", "endpointslices", ["list", "watch"]],
    ["networking.k8s.io", "servicecidrs", ["list", "watch"]],
    ["", "events", ["create"]],
  ];
  for (const [g, res, verbs] of need) {
    for (const v of verbs) {
      if (!allowed(g, res, v)) errs.push(`ClusterRole: missing ${v} on ${g || "core"}/${res}`);
    }
  }
  return errs;
}

if (import.meta.main) {
  const dir = Deno.args[0] ?? "deploy/kubernetes";
  const docs: Obj[] = [];
  for (const e of [...Deno.readDirSync(dir)].sort((a, b) => a.name.localeCompare(b.name))) {
    if (!e.name.endsWith(".yaml")) continue;
    for (const d of YAML.parseAllDocuments(Deno.readTextFileSync(`${dir}/${e.name}`))) {
      if (d.errors.length > 0) {
        console.error(`${e.name}: ${d.errors[0].message}`);
        Deno.exit(1);
      }
      const v = d.toJS();
      if (v) docs.push(v);
    }
  }
  const errs = validateManifests(docs);
  for (const e of errs) console.error(`manifest: ${e}`);
  console.log(`manifests: ${docs.length} documents checked, ${errs.length} problems`);
  Deno.exit(errs.length === 0 ? 0 : 1);
}
