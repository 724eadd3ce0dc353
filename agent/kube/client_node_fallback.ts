/**
 * Everything the agent still does through @kubernetes/client-node, in the one
 * module that imports it. Only dynamic imports reach this file, so the agent
 * loads client-node (tens of MB of memory) only when a kubeconfig needs it:
 * exec plugins, auth-providers and impersonation for credentials, and https
 * with insecure-skip-tls-verify, which Deno's fetch cannot do, for lists,
 * watches and the /version probe too.
 *
 * @module
 */
import {
  CoreV1Api,
  DiscoveryV1Api,
  HttpMethod,
  KubeConfig,
  NetworkingV1Api,
  RequestContext,
  VersionApi,
  Watch,
} from "@kubernetes/client-node";
import type { SelectedConfig } from "./kubeconfig_file.ts";

/** client-node's KubeConfig with the selected cluster and user only. */
export function toKubeConfig(sel: SelectedConfig): KubeConfig {
  const { cluster: c, user: u } = sel;
  const userName = sel.userName || "anonymous"; // client-node applies no TLS options without one
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{
      name: sel.clusterName,
      server: c.server,
      caFile: c.caFile,
      caData: c.caData,
      // client-node 2.x refuses plain http unless TLS verification is off.
      skipTLSVerify: c.insecure === true || c.server.startsWith("http:"),
      tlsServerName: c.tlsServerName,
      proxyUrl: c.proxyUrl,
    }],
    users: [{
      name: userName,
      // A token file goes through client-node's file authenticator, which re-reads it.
      token: u.tokenFile ? undefined : u.token,
      authProvider: u.authProvider ??
        (u.tokenFile ? { name: "tokenFile", config: { tokenFile: u.tokenFile } } : undefined),
      exec: u.exec,
      certFile: u.certFile,
      certData: u.certData,
      keyFile: u.keyFile,
      keyData: u.keyData,
      username: u.username,
      password: u.password,
      impersonateUser: u.as,
    }],
    contexts: [{ name: sel.context, cluster: sel.clusterName, user: userName }],
    currentContext: sel.context,
  });
  // undici offers HTTP/2, and the API server takes it; Deno's node:http2 then aborts the whole
  // process in nghttp2 (an assertion on GOAWAY, seen in the tests). HTTP/1.1 only.
  const dispatcherOptions = kc.createDispatcherOptions.bind(kc);
  kc.createDispatcherOptions = (cluster, agentOptions) => {
    const o = dispatcherOptions(cluster, agentOptions);
    return o.type === "agent" ? { ...o, connect: { ...o.connect, allowH2: false } } : o;
  };
  return kc;
}

/** The headers client-node's authenticators set for a request to `url`. */
export async function authHeaders(kc: KubeConfig, url: string): Promise<Record<string, string>> {
  const ctx = new RequestContext(url, HttpMethod.GET);
  await kc.applySecurityAuthentication(ctx);
  return ctx.getHeaders();
}

/** The TLS material client-node resolves (files, data, exec plugin certificates). */
export async function tlsOptions(
  kc: KubeConfig,
): Promise<{ ca?: string; cert?: string; key?: string; rejectUnauthorized?: boolean }> {
  const opts: Record<string, unknown> = {};
  await kc.applyToHTTPSOptions(opts as never);
  const text = (v: unknown) =>
    v === undefined || v === null
      ? undefined
      : typeof v === "string"
      ? v
      : new TextDecoder().decode(v as Uint8Array);
  return {
    ca: text(opts.ca),
    cert: text(opts.cert),
    key: text(opts.key),
    rejectUnauthorized: opts.rejectUnauthorized as boolean | undefined,
  };
}

/** client-node's Watch.watch (undici), for servers Deno's fetch cannot reach. */
export function watch(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean | undefined>,
  callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
  done: (err: unknown) => void,
): Promise<AbortController> {
  return new Watch(kc).watch(path, query, callback, done);
}

/** Selectors and version of a typed list. */
export interface TypedListQuery {
  /** Label selector of the list. */
  labelSelector?: string;
  /** Field selector of the list. */
  fieldSelector?: string;
  /** The resourceVersion to list at ("0": the watch cache). */
  resourceVersion?: string;
  /** How resourceVersion is matched (NotOlderThan, Exact). */
  resourceVersionMatch?: string;
}

/** Lists one of the watched resources through client-node's typed clients, as plain JSON. */
export async function typedList(kc: KubeConfig, path: string, q: TypedListQuery): Promise<unknown> {
  let res: unknown;
  switch (path) {
    case "/api/v1/services":
      res = await kc.makeApiClient(CoreV1Api).listServiceForAllNamespaces(q);
      break;
    case "/api/v1/nodes":
      res = await kc.makeApiClient(CoreV1Api).listNode(q);
      break;
    case "/apis/discovery.k8s.io/v1/endpointslices":
      res = await kc.makeApiClient(DiscoveryV1Api).listEndpointSliceForAllNamespaces(q);
      break;
    case "/apis/networking.k8s.io/v1/servicecidrs":
      res = await kc.makeApiClient(NetworkingV1Api).listServiceCIDR(q);
      break;
    default:
      throw new Error(`no typed client for ${path}`);
  }
  // Typed objects (Date fields) -> the plain JSON watch events carry.
  return JSON.parse(JSON.stringify(res));
}

/** GET /version through client-node. */
export async function getVersion(kc: KubeConfig): Promise<void> {
  await kc.makeApiClient(VersionApi).getCode();
}
