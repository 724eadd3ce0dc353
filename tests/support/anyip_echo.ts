/**
 * The benchmark's backends, run in the backend namespace: one TCP listener on 0.0.0.0 that the
 * namespace's `local` route makes answer on every endpoint address (AnyIP). Each connection is
 * answered with the address it reached, so a probe sees which endpoint served it.
 *
 * Usage: anyip_echo.ts <port>. Prints "ready" once listening.
 *
 * @module
 */
const port = Number(Deno.args[0]);
if (!(port > 0)) {
  console.error("usage: anyip_echo.ts <port>");
  Deno.exit(2);
}
const enc = new TextEncoder();
const listener = Deno.listen({ hostname: "0.0.0.0", port });
console.log("ready");
for await (const conn of listener) {
  const here = (conn.localAddr as Deno.NetAddr).hostname;
  conn.write(enc.encode(here + "\n")).catch(() => {}).finally(() => {
    try {
      conn.close();
    } catch { /* closed by the peer */ }
  });
}
