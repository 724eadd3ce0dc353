/**
 * The command lines of upstream's kube-proxy DaemonSets in ./ (kubeadm's and the kube-up addon's),
 * as argument lists after the program name, for the tests that start the agent the way those
 * manifests would.
 *
 * @module
 */
import { parse } from "yaml";

type Container = { command?: string[]; args?: string[] };

function container(file: string): Container {
  const ds = parse(Deno.readTextFileSync(new URL(file, import.meta.url)));
  return ds.spec.template.spec.containers[0] as Container;
}

/** A fixture's absolute path. */
export function fixturePath(file: string): string {
  return new URL(file, import.meta.url).pathname;
}

/**
 * kubeadm's container command after `/usr/local/bin/kube-proxy`, with `$(NODE_NAME)` expanded
 * as kubelet does and the config path replaced by `configPath` (the ConfigMap mount).
 */
export function kubeadmArgs(nodeName: string, configPath: string): string[] {
  const [program, ...args] = container("./kubeadm-kube-proxy-ds.yaml").command!;
  if (program !== "/usr/local/bin/kube-proxy") throw new Error(`unexpected program ${program}`);
  return args.map((a) =>
    a.replace("$(NODE_NAME)", nodeName).replace("/var/lib/kube-proxy/config.conf", configPath)
  );
}

/**
 * The addon's `kube-proxy ...` shell words, without the program and the shell's redirections.
 * Its in-cluster API address comes from the pod's environment; `extra` adds what a test needs
 * instead (e.g. --kubeconfig), after the manifest's own flags.
 */
export function addonArgs(extra: string[] = []): string[] {
  const [sh, dashC, script] = container("./addon-kube-proxy-ds.yaml").command!;
  if (sh !== "/bin/sh" || dashC !== "-c") throw new Error("the addon no longer runs a shell");
  const words = script.split(/\s+/).filter((w) => w && !/^\d?>>?/.test(w));
  if (words[0] !== "kube-proxy") throw new Error(`unexpected program ${words[0]}`);
  return [...words.slice(1), ...extra];
}
