/**
 * The lines of a child process's output (or any byte stream), as they arrive: the helper
 * processes of the tests and benches answer in newline-delimited text or JSON.
 *
 * @module
 */

/** Yields each complete line of `stream` (without its newline); a last unterminated one too. */
export async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let buf = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
  }
  if (buf !== "") yield buf;
}
