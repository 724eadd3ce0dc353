/**
 * How requests to the API server are authenticated and over which TLS client.
 *
 * {@link NativeCredentials} covers what kube-proxy's kubeconfigs use (bearer token or token
 * file, client certificate, basic auth, CA, plain http) without @kubernetes/client-node, whose
 * import alone costs tens of MB of memory. {@link ClientNodeCredentials} hands the rest to
 * client-node, loaded only then: exec plugins, auth-providers, impersonation, and https with
 * insecure-skip-tls-verify (a Deno HTTP client cannot skip verification; there the lists,
 * watches and probes also go through client-node, see agent/kube/client_node_fallback.ts).
 *
 * @module
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { KubeConfigError, type SelectedConfig } from "./kubeconfig_file.ts";

/** What {@link ApiFetch} needs to reach the API server. */
export interface KubeCredentials {
  /** API server base URL, without a trailing slash. */
  readonly server: string;
  /** Which implementation applies the credentials. */
  readonly backend: "native" | "client-node";
  /** False where Deno's fetch cannot reach the server (https without verification). */
  readonly nativeFetch: boolean;
  /** The HTTP client for fetch (CA, client certificate); null: Deno's default one. */
  httpClient(): Promise<Deno.HttpClient | null>;
  /** Authentication headers for a request. */
  headers(): Promise<Record<string, string>>;
  /** client-node's KubeConfig for the same cluster and user (loads client-node). */
  clientNodeConfig(): Promise<KubeConfig>;
}

/** client-go re-reads token files at most this often (bound service-account tokens rotate). */
export const TOKEN_REREAD_MS = 60_000;

/** A bearer token file, re-read at most once per {@link TOKEN_REREAD_MS}. */
class FileToken {
  #token: string;
  #readAt: number;
  readonly #now: () => number;
  readonly #onError: ((err: Error) => void) | undefined;

  /**
   * Reads the file now; when it cannot be read, `fallback` (the user's static token) is used,
   * else this throws. Later read errors keep the last token and go to `onError`.
   */
  constructor(
    readonly path: string,
    fallback?: string,
    now: () => number = Date.now,
    onError?: (err: Error) => void,
  ) {
    this.#now = now;
    this.#onError = onError;
    this.#readAt = this.#now();
    try {
      this.#token = this.#read();
    } catch (e) {
      if (fallback === undefined) throw e;
      this.#token = fallback;
    }
  }

  /** The current token. */
  get(): string {
    if (this.#now() - this.#readAt >= TOKEN_REREAD_MS) {
      this.#readAt = this.#now();
      try {
        this.#token = this.#read();
      } catch (e) {
        this.#onError?.(e as Error);
      }
    }
    return this.#token;
  }

  #read(): string {
    const t = Deno.readTextFileSync(this.path).trim();
    if (t === "") throw new Error(`token file ${this.path} is empty`);
    return t;
  }
}

/** Options of the credential implementations. */
export interface CredentialOptions {
  /** Clock for token re-reads (tests). */
  now?: () => number;
  /** Hears of a token file that could not be re-read (the last token is kept). */
  onTokenError?: (err: Error) => void;
}

function decode64(what: string, b64: string): string {
  try {
    return new TextDecoder().decode(Uint8Array.from(atob(b64.trim()), (c) => c.charCodeAt(0)));
  } catch {
    throw new KubeConfigError(`${what}-data is not valid base64`);
  }
}

/** PEM from `*-data` (which wins, as in client-go) or the file; undefined when neither is set. */
function pem(what: string, file?: string, data?: string): string | undefined {
  if (data !== undefined) return decode64(what, data);
  if (file === undefined) return undefined;
  try {
    return Deno.readTextFileSync(file);
  } catch (e) {
    throw new KubeConfigError(`cannot read ${what} ${file}: ${(e as Error).message}`);
  }
}

function basic(user: string, password: string): string {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  return `Basic ${btoa(String.fromCharCode(...bytes))}`;
}

async function clientNodeConfigOf(sel: SelectedConfig): Promise<KubeConfig> {
  const { toKubeConfig } = await import("./client_node_fallback.ts");
  return toKubeConfig(sel);
}

/** Credentials applied here, without client-node. Files are read (and checked) at once. */
export class NativeCredentials implements KubeCredentials {
  readonly server: string;
  readonly backend = "native";
  readonly nativeFetch = true;
  readonly #sel: SelectedConfig;
  /** The PEM material (CA, client certificate and key), read at construction. */
  readonly tls: { readonly ca?: string; readonly cert?: string; readonly key?: string };
  readonly #token?: FileToken | string;
  readonly #basic?: string;
  #client: Deno.HttpClient | null | undefined;

  /** Throws {@link KubeConfigError} for unreadable files or a certificate without its key. */
  constructor(sel: SelectedConfig, opts: CredentialOptions = {}) {
    const { cluster: c, user: u } = sel;
    this.#sel = sel;
    this.server = c.server;
    const cert = pem("client-certificate", u.certFile, u.certData);
    const key = pem("client-key", u.keyFile, u.keyData);
    if ((cert === undefined) !== (key === undefined)) {
      throw new KubeConfigError(
        `user "${sel.userName}": client-certificate and client-key must both be set`,
      );
    }
    this.tls = { ca: pem("certificate-authority", c.caFile, c.caData), cert, key };
    if (u.tokenFile) {
      try {
        this.#token = new FileToken(u.tokenFile, u.token, opts.now, opts.onTokenError);
      } catch (e) {
        throw new KubeConfigError(`cannot read tokenFile ${u.tokenFile}: ${(e as Error).message}`);
      }
    } else {
      this.#token = u.token;
    }
    if (u.username !== undefined) this.#basic = basic(u.username, u.password ?? "");
  }

  /** Creates the client once: only https with a CA or client certificate needs one. */
  httpClient(): Promise<Deno.HttpClient | null> {
    if (this.#client === undefined) {
      const { ca, cert, key } = this.tls;
      this.#client = this.server.startsWith("https:") && (ca || cert)
        ? Deno.createHttpClient({
          ...(ca ? { caCerts: [ca] } : {}),
          ...(cert && key ? { cert, key } : {}),
        })
        : null;
    }
    return Promise.resolve(this.#client);
  }

  /** Bearer token (a token file re-read at most once a minute), else basic auth. */
  headers(): Promise<Record<string, string>> {
    const t = this.#token instanceof FileToken ? this.#token.get() : this.#token;
    const auth = t ? `Bearer ${t}` : this.#basic;
    const h: Record<string, string> = auth ? { authorization: auth } : {};
    return Promise.resolve(h);
  }

  /** The same cluster and user for client-node (not needed on this path; kept for the interface). */
  clientNodeConfig(): Promise<KubeConfig> {
    return clientNodeConfigOf(this.#sel);
  }
}

/** Credentials applied by client-node's KubeConfig, loaded on first use. */
export class ClientNodeCredentials implements KubeCredentials {
  readonly server: string;
  readonly backend = "client-node";
  readonly nativeFetch: boolean;
  readonly #sel: SelectedConfig;
  #kc?: Promise<KubeConfig>;
  #client?: Promise<Deno.HttpClient | null>;

  /** `reason` says why client-node is needed (see {@link clientNodeReason}). */
  constructor(sel: SelectedConfig, readonly reason: string) {
    this.#sel = sel;
    this.server = sel.cluster.server;
    this.nativeFetch = !insecureHttps(sel);
  }

  /** Loads client-node and builds its KubeConfig (once). */
  clientNodeConfig(): Promise<KubeConfig> {
    return (this.#kc ??= clientNodeConfigOf(this.#sel));
  }

  /** The CA and client certificate client-node resolves (exec plugins may supply one). */
  httpClient(): Promise<Deno.HttpClient | null> {
    return (this.#client ??= (async () => {
      if (!this.server.startsWith("https:") || !this.nativeFetch) return null;
      const { tlsOptions } = await import("./client_node_fallback.ts");
      const o = await tlsOptions(await this.clientNodeConfig());
      return Deno.createHttpClient({
        ...(o.ca ? { caCerts: [o.ca] } : {}),
        ...(o.cert && o.key ? { cert: o.cert, key: o.key } : {}),
      });
    })());
  }

  /** The headers client-node's authenticators set (exec plugins cache their tokens). */
  async headers(): Promise<Record<string, string>> {
    const { authHeaders } = await import("./client_node_fallback.ts");
    return await authHeaders(await this.clientNodeConfig(), this.server);
  }
}

function insecureHttps(sel: SelectedConfig): boolean {
  return sel.cluster.insecure === true && sel.cluster.server.startsWith("https:");
}

/** Why this selection needs client-node, or undefined when {@link NativeCredentials} will do. */
export function clientNodeReason(sel: SelectedConfig): string | undefined {
  const u = sel.user, who = `user "${sel.userName}"`;
  if (u.exec) return `${who} has an exec credential plugin`;
  if (u.authProvider) return `${who} has auth-provider "${u.authProvider.name ?? "?"}"`;
  if (u.as) return `${who} impersonates "${u.as}"`;
  if (insecureHttps(sel)) {
    return `cluster "${sel.clusterName}" is https with insecure-skip-tls-verify, which ` +
      "Deno's fetch cannot do";
  }
  return undefined;
}

/** The credentials for a selection: native unless {@link clientNodeReason} says otherwise. */
export function credentialsFor(sel: SelectedConfig, opts: CredentialOptions = {}): KubeCredentials {
  const reason = clientNodeReason(sel);
  return reason ? new ClientNodeCredentials(sel, reason) : new NativeCredentials(sel, opts);
}
