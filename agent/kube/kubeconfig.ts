/**
 * Builds the API client configuration the way kube-proxy does:
 * 1. `--kubeconfig` file, if given;
 * 2. else in-cluster service account config when KUBERNETES_SERVICE_HOST is set;
 * 3. else `--master` alone (no credentials), if given;
 * 4. else $KUBECONFIG (colon-separated files, merged first-wins) / ~/.kube/config.
 * `--master` then overrides the server URL of the selected cluster.
 * The files are read here (agent/kube/kubeconfig_file.ts); @kubernetes/client-node is loaded only
 * for what it alone can do (see agent/kube/kube_credentials.ts).
 * @module
 */
import {
  type KubeConfigDoc,
  kubeconfigEnvFiles,
  KubeConfigError,
  mergeKubeConfigs,
  parseKubeConfig,
  readKubeConfigFile,
  selectContext,
  type SelectedConfig,
} from "./kubeconfig_file.ts";
import { clientNodeReason, credentialsFor, type KubeCredentials } from "./kube_credentials.ts";
import type { Logger } from "../log.ts";

export { KubeConfigError };

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
  /** Hears of a token file that cannot be re-read later (the last token is kept). */
  log?: Logger;
  /** Clock for token file re-reads (tests). */
  now?: () => number;
}

/** Where the configuration came from (for the startup log line). */
export type KubeConfigSource = "kubeconfig" | "in-cluster" | "master" | "default";

/** Result of {@link loadKubeConfig}. */
export interface LoadedKubeConfig {
  /** The credentials requests go out with. */
  creds: KubeCredentials;
  /** How it was found. */
  source: KubeConfigSource;
  /** The API server URL in use. */
  server: string;
  /** Why @kubernetes/client-node applies the credentials (undefined: it is not loaded). */
  clientNode?: string;
  /** Settings that cannot be honoured, for the log. */
  warnings: string[];
}

const SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

function inCluster(
  env: (n: string) => string | undefined,
  prefix: string,
  warn: string[],
): SelectedConfig {
  const host = env("KUBERNETES_SERVICE_HOST")!;
  const port = env("KUBERNETES_SERVICE_PORT");
  const tokenFile = `${prefix}${SA_DIR}/token`;
  try {
    Deno.statSync(tokenFile);
  } catch {
    throw new KubeConfigError(
      `in-cluster config: KUBERNETES_SERVICE_HOST is set but ${tokenFile} is missing; ` +
        "pass --kubeconfig or mount the service account token",
    );
  }
  if (!port) {
    throw new KubeConfigError(
      "in-cluster config: KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not; " +
        "set both or pass --kubeconfig",
    );
  }
  const caFile = `${prefix}${SA_DIR}/ca.crt`;
  let ca: string | undefined = caFile;
  try {
    if (Deno.readTextFileSync(caFile).trim() === "") throw new Error("the file is empty");
  } catch (e) {
    // As client-go: carry on with the system roots.
    warn.push(`in-cluster CA ${caFile} unusable (${(e as Error).message}); using system roots`);
    ca = undefined;
  }
  const h = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  return {
    context: "in-cluster",
    clusterName: "in-cluster",
    cluster: { server: `https://${h}:${port}`, caFile: ca },
    userName: "serviceaccount",
    user: { tokenFile },
  };
}

function fromDefaultFiles(env: (n: string) => string | undefined): SelectedConfig {
  const files = kubeconfigEnvFiles(env("KUBECONFIG") ?? "");
  const path = files.length > 0 ? env("KUBECONFIG")! : `${env("HOME") ?? ""}/.kube/config`;
  if (files.length === 0) files.push(path);
  const docs: KubeConfigDoc[] = [];
  let missing = "";
  for (const f of files) {
    try {
      Deno.statSync(f);
    } catch (e) {
      missing ||= (e as Error).message;
      continue; // client-go skips the $KUBECONFIG files that do not exist
    }
    try {
      docs.push(readKubeConfigFile(f));
    } catch (e) {
      throw new KubeConfigError(`${f}: cannot load: ${(e as Error).message}`);
    }
  }
  if (docs.length === 0) {
    throw new KubeConfigError(
      `no API server configuration: pass --kubeconfig=<file> or --master=<url>, run in a ` +
        `pod, or create ${path} (${missing})`,
    );
  }
  return selectContext(mergeKubeConfigs(docs), path);
}

/** Builds the credentials from the flags and environment; throws {@link KubeConfigError}. */
export function loadKubeConfig(opts: KubeConfigOptions = {}): LoadedKubeConfig {
  const env = opts.env ?? ((n: string) => Deno.env.get(n));
  const warnings: string[] = [];
  let sel: SelectedConfig;
  let source: KubeConfigSource;
  if (opts.kubeconfig) {
    let doc: KubeConfigDoc;
    try {
      doc = readKubeConfigFile(opts.kubeconfig);
    } catch (e) {
      throw new KubeConfigError(
        `--kubeconfig ${opts.kubeconfig}: cannot load: ${(e as Error).message}`,
      );
    }
    sel = selectContext(doc, `--kubeconfig ${opts.kubeconfig}`);
    source = "kubeconfig";
  } else if (env("KUBERNETES_SERVICE_HOST")) {
    sel = inCluster(env, opts.serviceAccountPrefix ?? "", warnings);
    source = "in-cluster";
  } else if (opts.master) {
    sel = {
      context: "master",
      clusterName: "master",
      cluster: { server: "" },
      userName: "",
      user: {},
    };
    source = "master";
  } else {
    sel = fromDefaultFiles(env);
    source = "default";
  }
  return finish(sel, source, warnings, opts);
}

/**
 * Builds credentials from kubeconfig YAML text (relative paths resolve against `dir`, default
 * the working directory); for tests and tools that hold a kubeconfig in memory.
 */
export function kubeConfigFromString(
  text: string,
  opts: Omit<KubeConfigOptions, "kubeconfig" | "env" | "serviceAccountPrefix"> & { dir?: string } =
    {},
): LoadedKubeConfig {
  const sel = selectContext(parseKubeConfig(text, opts.dir ?? Deno.cwd()), "kubeconfig text");
  return finish(sel, "kubeconfig", [], opts);
}

function finish(
  selected: SelectedConfig,
  source: KubeConfigSource,
  warnings: string[],
  opts: KubeConfigOptions,
): LoadedKubeConfig {
  let sel = selected;
  if (opts.master) {
    sel = { ...sel, cluster: { ...sel.cluster, server: opts.master.replace(/\/+$/, "") } };
  }
  const server = sel.cluster.server;
  if (!server) throw new KubeConfigError("the selected kubeconfig cluster has no server URL");
  const clientNode = clientNodeReason(sel);
  const creds = credentialsFor(sel, {
    now: opts.now,
    onTokenError: (err) =>
      opts.log?.warn("Cannot re-read the API token file; keeping the last token", {
        err: err.message,
      }),
  });
  // Deno's fetch cannot set the TLS server name nor take a proxy from here (client-node can,
  // but it makes the requests only where Deno's fetch cannot).
  if (creds.nativeFetch && server.startsWith("https:") && sel.cluster.tlsServerName) {
    warnings.push(
      `tls-server-name "${sel.cluster.tlsServerName}" is ignored (Deno's fetch cannot set ` +
        `it); the server certificate must be valid for ${new URL(server).hostname}`,
    );
  }
  if (creds.nativeFetch && sel.cluster.proxyUrl) {
    warnings.push(
      `proxy-url ${sel.cluster.proxyUrl} is ignored; set HTTPS_PROXY / HTTP_PROXY instead`,
    );
  }
  return { creds, source, server, clientNode, warnings };
}
