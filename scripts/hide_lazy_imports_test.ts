import assert from "node:assert/strict";
import { hideLazyImports } from "./hide_lazy_imports.ts";

Deno.test("hideLazyImports: literal chunk imports are wrapped, nothing else changes", () => {
  const src = [
    'import { a } from "./chunk-AB12.js";',
    'const m = await import("./client_node_fallback-RERN2DBI.js");',
    'const n = await import("node:fs");',
    'const w = new Worker(import.meta.url, { type: "module" });',
  ].join("\n");
  const { text, count } = hideLazyImports(src);
  assert.equal(count, 1);
  assert.match(text, /await import\(String\("\.\/client_node_fallback-RERN2DBI\.js"\)\)/);
  assert.match(text, /^import \{ a \} from "\.\/chunk-AB12\.js";/);
  assert.match(text, /import\("node:fs"\)/);
  assert.match(text, /new Worker\(import\.meta\.url/);
});
