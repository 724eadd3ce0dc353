/**
 * Builds the API client configuration the way kube-proxy does:
 * 1. `--kubeconfig` file, if given;
 * 2. else in-cluster service account config when KUBERNETES_SERVICE_HOST is set;
 * 3. else `--master` alone (no credentials), if given;
 * 4. else $KUBECONFIG / ~/.kube/config.
 * `--master` then overrides the server URL of the selected cluster.
 * @module
 */
import { KubeConfig } from "@kubernetes/client-node";

/** Inputs of {@link loadKubeConfig}. */
export interface KubeConfigOptions {
  /** --kubeconfig path. */
  kubeconfig?: string;
  /** --master URL. */
  master?: string;
  /** Environment lookup, for tests; default Deno.env.get. */
  env?: (name: string) => string | undefined;
  /** Prefix for the service-account files (tests); default "". */
  serviceAccountPrefix?: string;
}

/** Where the configuration came from (for the startup log line). */
export type KubeConfigSource = "kubeconfig" | "in-cluster" | "master" | "default";

/** Result of {@link loadKubeConfig}. */
export interface LoadedKubeConfig {
  /** The client-node configuration. */
  kc: KubeConfig;
  /** How it was found. */
  source: KubeConfigSource;
  /** The API server URL in use. */
  server: string;
}

/** Cannot build a client configuration; the message says what to pass instead. */
export class KubeConfigError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "KubeConfigError";
  }
}

function withServer(kc: KubeConfig, server: string): KubeConfig {
  const current = kc.getCurrentCluster();
  if (!current) {
    throw new KubeConfigError("the kubeconfig has no current cluster; set current-context");
  }
  const out = new KubeConfig();
  out.loadFromOptions({
    clusters: kc.clusters.map((c) =>
      c.name === current.name
        // client-node 2.x refuses plain http unless TLS verification is off.
        ? { ...c, server, skipTLSVerify: c.skipTLSVerify || server.startsWith("http:") }
        : c
    ),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.getCurrentContext(),
  });
  return out;
}

/** Builds the KubeConfig from the flags and environment; throws {@link KubeConfigError}. */
export function loadKubeConfig(opts: KubeConfigOptions = {}): LoadedKubeConfig {
  const env = opts.env ?? ((n: string) => Deno.env.get(n));
  let kc = new KubeConfig();
  let source: KubeConfigSource;
  if (opts.kubeconfig) {
    try {
      Deno.statSync(opts.kubeconfig);
      kc.loadFromFile(opts.kubeconfig);
    } catch (e) {
      throw new KubeConfigError(
        `--kubeconfig ${opts.kubeconfig}: cannot load: ${(e as Error).message}`,
      );
    }
    source = "kubeconfig";
  } else if (env("KUBERNETES_SERVICE_HOST")) {
    const prefix = opts.serviceAccountPrefix ?? "";
    const tokenFile = `${prefix}/var/run/secrets/kubernetes.io/serviceaccount/token`;
    try {
      Deno.statSync(tokenFile);
    } catch {
      throw new KubeConfigError(
        `in-cluster config: KUBERNETES_SERVICE_HOST is set but ${tokenFile} is missing; ` +
          "pass --kubeconfig or mount the service account token",
      );
    }
    kc.loadFromCluster(prefix);
    source = "in-cluster";
  } else if (opts.master) {
    kc.loadFromOptions({
      clusters: [{ name: "master", server: opts.master, skipTLSVerify: false }],
      users: [{ name: "anonymous" }],
      contexts: [{ name: "master", cluster: "master", user: "anonymous" }],
      currentContext: "master",
    });
    source = "master";
  } else {
    const path = env("KUBECONFIG") ?? `${env("HOME") ?? ""}/.kube/config`;
    try {
      Deno.statSync(path.split(":")[0]);
      kc.loadFromFile(path.split(":")[0]);
    } catch (e) {
      throw new KubeConfigError(
        `no API server configuration: pass --kubeconfig=<file> or --master=<url>, run in a ` +
          `pod, or create ${path} (${(e as Error).message})`,
      );
    }
    source = "default";
  }
  if (opts.master) kc = withServer(kc, opts.master);
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new KubeConfigError("the selected kubeconfig cluster has no server URL");
  return { kc, source, server };
}
