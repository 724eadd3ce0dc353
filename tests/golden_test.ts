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
 * The partial syncs after a cold start (golden_changes.ts) are recorded as
 * production sends them (golden_wire.ts): element-only transactions as the
 * decoded netlink batch the raw writer encodes, the others as nft script,
 * in tests/golden/<name>.changes.txt.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GOLDEN } from "./golden_clusters.ts";
import { coldStartScript } from "./programmed.ts";
import { GOLDEN_CHANGES } from "./golden_changes.ts";
import { changesWire } from "./golden_wire.ts";

/** The script a cold start of one golden cluster sends, through a real sync. */
function renderGolden(name: string): Promise<string> {
  const c = GOLDEN[name];
  return coldStartScript(c.state, c.config);
}

const dir = new URL("./golden/", import.meta.url);
const update = Deno.env.get("KNP_UPDATE_GOLDEN") === "1";

/** Compares `got` with golden file `file` (or writes it, with KNP_UPDATE_GOLDEN=1). */
async function compareGolden(file: string, got: string): Promise<void> {
  const url = new URL(file, dir);
  if (update) {
    await Deno.writeTextFile(url, got);
    return;
  }
  let want: string;
  try {
    want = await Deno.readTextFile(url);
  } catch {
    throw new Error(`missing ${url.pathname}: run with KNP_UPDATE_GOLDEN=1 to create it`);
  }
  assert.equal(got, want, `${file} differs; if intended, regenerate with KNP_UPDATE_GOLDEN=1`);
}

for (const name of Object.keys(GOLDEN)) {
  Deno.test(`golden: ${name}`, async () => {
    await compareGolden(`${name}.nft`, await renderGolden(name));
  });
}

for (const [name, changes] of Object.entries(GOLDEN_CHANGES)) {
  Deno.test(`golden changes: ${name}`, async () => {
    const c = GOLDEN[name];
    await compareGolden(`${name}.changes.txt`, await changesWire(c.state, c.config, changes));
  });
}
