/**
 * An https front for the fake API server, for tests of the TLS paths: it
 * serves with a certificate from agent/testdata/tls/ (a test-only CA, valid
 * 2000..2100, made with `openssl ca`; the server certificate is for
 * 127.0.0.1, ::1 and localhost), checks the bearer token when given one, and
 * forwards everything (watch streams too) to the plain-http fake; a client
 * that goes away cancels the forwarded body, which ends the upstream request.
 *
 * @module
 */
import type { FakeApiServer } from "../../tests/fakeapi/server.ts";

const dir = new URL("./tls/", import.meta.url).pathname;

/** The test PKI's files. */
export const TLS_FILES = {
  ca: `${dir}ca.crt`,
  serverCert: `${dir}server.crt`,
  serverKey: `${dir}server.key`,
  clientCert: `${dir}client.crt`,
  clientKey: `${dir}client.key`,
};

/** A running https front. */
export interface TlsFront {
  /** Its base URL, e.g. "https://127.0.0.1:41234". */
  url: string;
  /** Authorization headers seen, in order. */
  auth: string[];
  /** Stops it (close the fake API server first, so watch streams end). */
  close(): Promise<void>;
}

/** Starts an https front for `api`; with `token`, other bearer tokens get 401. */
export function startTlsFront(api: FakeApiServer, opts: { token?: string } = {}): TlsFront {
  const auth: string[] = [];
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: Deno.readTextFileSync(TLS_FILES.serverCert),
    key: Deno.readTextFileSync(TLS_FILES.serverKey),
    onListen: () => {},
  }, async (req) => {
    const a = req.headers.get("authorization") ?? "";
    auth.push(a);
    if (opts.token !== undefined && a !== `Bearer ${opts.token}`) {
      return Response.json({ kind: "Status", code: 401, reason: "Unauthorized" }, { status: 401 });
    }
    const u = new URL(req.url);
    const res = await fetch(api.url + u.pathname + u.search, {
      method: req.method,
      headers: req.headers,
      body: req.body,
    });
    return new Response(res.body, { status: res.status, headers: res.headers });
  });
  return {
    url: `https://127.0.0.1:${server.addr.port}`,
    auth,
    close: () => server.shutdown(),
  };
}
