/**
 * Golden dumps: the nft script a cold start sends for three representative
 * clusters (through a real Proxier sync, as `--dry-run` prints it), compared
 * byte for byte with tests/golden/<name>.nft. After an intended
 * change to the rule layout, regenerate with
 *
 *   KNP_UPDATE_GOLDEN=1 ./denow test -A tests/golden_test.ts
 *
 * and review the diff. tests/e2e/dataplane_test.ts loads the same files
 * into a real kernel.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GOLDEN } from "./golden_clusters.ts";
import { coldStartScript } from "./programmed.ts";

/** The script a cold start of one golden cluster sends, through a real sync. */
function renderGolden(name: string): Promise<string> {
  const c = GOLDEN[name];
  return coldStartScript(c.state, c.config);
}

const dir = new URL("./golden/", import.meta.url);
const update = Deno.env.get("KNP_UPDATE_GOLDEN") === "1";

for (const name of Object.keys(GOLDEN)) {
  Deno.test(`golden: ${name}`, async () => {
    const file = new URL(`${name}.nft`, dir);
    const got = await renderGolden(name);
    if (update) {
      await Deno.writeTextFile(file, got);
      return;
    }
    let want: string;
    try {
      want = await Deno.readTextFile(file);
    } catch {
      throw new Error(`missing ${file.pathname}: run with KNP_UPDATE_GOLDEN=1 to create it`);
    }
    assert.equal(
      got,
      want,
      `${name}.nft differs; if intended, regenerate with KNP_UPDATE_GOLDEN=1`,
    );
  });
}
