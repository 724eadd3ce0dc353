/**
 * Reads kubeconfig files the way client-go's clientcmd does, for the forms a
 * kube-proxy uses: clusters, users, contexts and current-context, several files
 * merged first-wins, relative paths resolved against the file that names them.
 * Nothing here talks to the API server or loads @kubernetes/client-node.
 *
 * @module
 */
import { parse as parseYaml } from "yaml";

/** Cannot build a client configuration; the message says what to pass instead. */
export class KubeConfigError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "KubeConfigError";
  }
}

/** A kubeconfig cluster entry; file paths are absolute, `*Data` fields base64 as in the file. */
export interface ClusterEntry {
  /** API server URL, without a trailing slash. */
  server: string;
  /** certificate-authority. */
  caFile?: string;
  /** certificate-authority-data. */
  caData?: string;
  /** insecure-skip-tls-verify. */
  insecure?: boolean;
  /** tls-server-name. */
  tlsServerName?: string;
  /** proxy-url. */
  proxyUrl?: string;
}

/** A kubeconfig user entry; file paths are absolute, `*Data` fields base64 as in the file. */
export interface UserEntry {
  /** Bearer token. */
  token?: string;
  /** tokenFile: a bearer token file, re-read periodically. */
  tokenFile?: string;
  /** client-certificate. */
  certFile?: string;
  /** client-certificate-data. */
  certData?: string;
  /** client-key. */
  keyFile?: string;
  /** client-key-data. */
  keyData?: string;
  /** Basic auth user name. */
  username?: string;
  /** Basic auth password. */
  password?: string;
  /** An exec credential plugin, as in the file (its command resolved as client-go does). */
  exec?: Record<string, unknown>;
  /** An auth-provider, as in the file. */
  authProvider?: Record<string, unknown>;
  /** as: the user to impersonate. */
  as?: string;
}

/** A kubeconfig context entry. */
export interface ContextEntry {
  /** Cluster name. */
  cluster?: string;
  /** User name. */
  user?: string;
}

/** One or more kubeconfig files, merged. */
export interface KubeConfigDoc {
  /** Clusters by name. */
  clusters: Map<string, ClusterEntry>;
  /** Users by name. */
  users: Map<string, UserEntry>;
  /** Contexts by name. */
  contexts: Map<string, ContextEntry>;
  /** current-context, if any file set one. */
  currentContext?: string;
}

/** The current context's cluster and user. */
export interface SelectedConfig {
  /** Context name. */
  context: string;
  /** Cluster name. */
  clusterName: string;
  /** The cluster. */
  cluster: ClusterEntry;
  /** User name ("" for a context without one). */
  userName: string;
  /** The user (empty for a context without one). */
  user: UserEntry;
}

type Raw = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const obj = (v: unknown): Raw | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? v as Raw : undefined;

/** `p` made absolute against `dir` (client-go resolves only non-empty relative paths). */
function resolvePath(dir: string, p: string | undefined): string | undefined {
  if (p === undefined || p.startsWith("/")) return p;
  return normalize(`${dir}/${p}`);
}

function normalize(path: string): string {
  const out: string[] = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return "/" + out.join("/");
}

/** The directory of `file`, absolute. */
function dirOf(file: string): string {
  const abs = file.startsWith("/") ? file : `${Deno.cwd()}/${file}`;
  return normalize(abs.slice(0, abs.lastIndexOf("/")) || "/");
}

/** Parses one kubeconfig text; relative paths resolve against `dir`. Throws on malformed YAML. */
export function parseKubeConfig(text: string, dir: string): KubeConfigDoc {
  const root = obj(parseYaml(text)) ?? {};
  const doc: KubeConfigDoc = {
    clusters: new Map(),
    users: new Map(),
    contexts: new Map(),
    currentContext: str(root["current-context"]),
  };
  const named = (key: string, inner: string, add: (name: string, v: Raw) => void) => {
    const list = root[key];
    if (!Array.isArray(list)) return;
    const seen = new Set<string>();
    for (const item of list) {
      const name = str(obj(item)?.name);
      if (name === undefined) continue;
      // client-go refuses a file that names an entry twice.
      if (seen.has(name)) throw new Error(`duplicate name "${name}" in ${key}`);
      seen.add(name);
      add(name, obj(obj(item)?.[inner]) ?? {});
    }
  };
  named("clusters", "cluster", (name, c) => {
    doc.clusters.set(name, {
      server: (str(c.server) ?? "").replace(/\/+$/, ""),
      caFile: resolvePath(dir, str(c["certificate-authority"])),
      caData: str(c["certificate-authority-data"]),
      insecure: c["insecure-skip-tls-verify"] === true,
      tlsServerName: str(c["tls-server-name"]),
      proxyUrl: str(c["proxy-url"]),
    });
  });
  named("users", "user", (name, u) => {
    let exec = obj(u.exec);
    const cmd = str(exec?.command);
    // client-go resolves the exec command only when it is a path, not a name looked up in PATH.
    if (exec && cmd?.includes("/")) exec = { ...exec, command: resolvePath(dir, cmd) };
    doc.users.set(name, {
      token: str(u.token),
      tokenFile: resolvePath(dir, str(u.tokenFile)),
      certFile: resolvePath(dir, str(u["client-certificate"])),
      certData: str(u["client-certificate-data"]),
      keyFile: resolvePath(dir, str(u["client-key"])),
      keyData: str(u["client-key-data"]),
      username: str(u.username),
      password: str(u.password),
      exec,
      authProvider: obj(u["auth-provider"]),
      as: str(u.as),
    });
  });
  named("contexts", "context", (name, c) => {
    doc.contexts.set(name, { cluster: str(c.cluster), user: str(c.user) });
  });
  return doc;
}

/** Merges documents in order; the first to define a name or current-context wins (client-go). */
export function mergeKubeConfigs(docs: KubeConfigDoc[]): KubeConfigDoc {
  const out: KubeConfigDoc = { clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const d of docs) {
    out.currentContext ??= d.currentContext;
    for (const [k, v] of d.clusters) if (!out.clusters.has(k)) out.clusters.set(k, v);
    for (const [k, v] of d.users) if (!out.users.has(k)) out.users.set(k, v);
    for (const [k, v] of d.contexts) if (!out.contexts.has(k)) out.contexts.set(k, v);
  }
  return out;
}

/** Reads and parses one file; errors name the file. */
export function readKubeConfigFile(path: string): KubeConfigDoc {
  const text = Deno.readTextFileSync(path);
  try {
    return parseKubeConfig(text, dirOf(path));
  } catch (e) {
    throw new Error(`not a valid kubeconfig: ${(e as Error).message.split("\n")[0]}`);
  }
}

/**
 * The files $KUBECONFIG names (colon-separated, empty entries and repeats dropped), as
 * client-go's loading rules read them.
 */
export function kubeconfigEnvFiles(value: string): string[] {
  return [...new Set(value.split(":").filter((p) => p !== ""))];
}

/** The current context's cluster and user; `where` names the source in errors. */
export function selectContext(doc: KubeConfigDoc, where: string): SelectedConfig {
  const context = doc.currentContext;
  if (!context) {
    throw new KubeConfigError(
      `${where}: no current-context is set; set current-context to one of: ` +
        ([...doc.contexts.keys()].join(", ") || "(no contexts defined)"),
    );
  }
  const ctx = doc.contexts.get(context);
  if (!ctx) {
    throw new KubeConfigError(`${where}: current-context "${context}" names no defined context`);
  }
  const clusterName = ctx.cluster ?? "";
  const cluster = doc.clusters.get(clusterName);
  if (!cluster) {
    throw new KubeConfigError(
      `${where}: context "${context}" refers to cluster "${clusterName}", which is not defined`,
    );
  }
  const userName = ctx.user ?? "";
  const user = userName === "" ? {} : doc.users.get(userName);
  if (!user) {
    throw new KubeConfigError(
      `${where}: context "${context}" refers to user "${userName}", which is not defined`,
    );
  }
  return { context, clusterName, cluster, userName, user };
}
