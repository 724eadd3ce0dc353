import assert from "node:assert/strict";
import { ApiFetch } from "./api_fetch.ts";
import { kubeConfigFromString } from "./kubeconfig.ts";
import { NativeWatch } from "./native_watch.ts";
import { kubeconfigFor } from "../../tests/fakeapi/resources.ts";

/** Serves one watch body written as the given byte chunks, then ends it. */
function serveChunks(chunks: Uint8Array[]): { url: string; close: () => Promise<void> } {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    const body = new ReadableStream<Uint8Array>({
      async start(c) {
        for (const chunk of chunks) {
          c.enqueue(chunk);
          await new Promise((r) => setTimeout(r, 5)); // separate reads on the client
        }
        c.close();
      },
    });
    return new Response(body, { headers: { "content-type": "application/json" } });
  });
  return { url: `http://127.0.0.1:${server.addr.port}`, close: () => server.shutdown() };
}

function connect(url: string): ApiFetch {
  return new ApiFetch(kubeConfigFromString(kubeconfigFor(url)).creds);
}

Deno.test("watch events split across reads, even inside a UTF-8 character, arrive whole", async () => {
  const text = [
    JSON.stringify({ type: "ADDED", object: { metadata: { name: "caf\u00e9-\u{1F600}" } } }),
    "not json",
    "",
    JSON.stringify({ type: "MODIFIED", object: { metadata: { name: "b" } } }),
    JSON.stringify({ type: "DELETED", object: { metadata: { name: "c" } } }),
  ].join("\n") + "\n";
  const bytes = new TextEncoder().encode(text);
  // Cut inside the emoji (4 bytes), right after a newline, and inside the next line.
  const emoji = bytes.indexOf(0xf0);
  const afterGarbled = new TextEncoder().encode(text.slice(0, text.indexOf("not json") + 9)).length;
  const cuts = [emoji + 2, afterGarbled, afterGarbled + 15, bytes.length];
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const cut of cuts) {
    chunks.push(bytes.slice(from, cut));
    from = cut;
  }
  const server = serveChunks(chunks);
  try {
    const seen: string[] = [];
    const garbled: string[] = [];
    let ended: (err: unknown) => void = () => {};
    const done = new Promise((r) => ended = r);
    await new NativeWatch(connect(server.url), (l) => garbled.push(l)).watch(
      "/api/v1/services",
      {},
      (phase, obj) =>
        seen.push(`${phase} ${(obj as { metadata: { name: string } }).metadata.name}`),
      ended,
    );
    assert.equal(await done, null);
    assert.deepEqual(seen, ["ADDED caf\u00e9-\u{1F600}", "MODIFIED b", "DELETED c"]);
    assert.deepEqual(garbled, ["not json"]);
  } finally {
    await server.close();
  }
});
