/**
 * Post-processes `deno bundle --code-splitting` output (deno task bundle): every dynamic import
 * of a chunk, `import("./x-HASH.js")`, becomes `import(String("./x-HASH.js"))`.
 *
 * Why: `deno run` analyses every literal dynamic import of the program before it starts, unless
 * its cache already holds the analysis. For the client-node chunk (6.7 MB) that costs about
 * 85 MB of peak RSS and half a second on every start with an empty or read-only DENO_DIR, which
 * is every start of the image (read-only root). A specifier that is not a literal is resolved
 * only when the import runs, against the same module, so behaviour is unchanged; `deno compile`
 * gets the chunks through `--include dist/bundle`.
 *
 * Usage: deno run --allow-read=DIR --allow-write=DIR scripts/hide_lazy_imports.ts DIR
 * @module
 */

const LITERAL_CHUNK_IMPORT = /\bimport\(("\.\/[\w.-]+\.js")\)/g;

/** `source` with each literal dynamic import of a sibling chunk wrapped in String(). */
export function hideLazyImports(source: string): { text: string; count: number } {
  let count = 0;
  const text = source.replace(LITERAL_CHUNK_IMPORT, (_, spec: string) => {
    count++;
    return `import(String(${spec}))`;
  });
  return { text, count };
}

if (import.meta.main) {
  const dir = Deno.args[0];
  if (!dir) throw new Error("usage: hide_lazy_imports.ts DIR");
  let total = 0;
  for (const e of Deno.readDirSync(dir)) {
    if (!e.isFile || !e.name.endsWith(".js")) continue;
    const path = `${dir}/${e.name}`;
    const { text, count } = hideLazyImports(Deno.readTextFileSync(path));
    if (count > 0) Deno.writeTextFileSync(path, text);
    total += count;
  }
  if (total === 0) throw new Error(`${dir}: no dynamic chunk import found; did the bundle change?`);
}
