// CI's drift check: fails when the committed files differ from what they are made from.
//   1. openapi.json  vs the app's document now (skipped with --types-only, or when the
//      repository's Python cannot import the app: said so, and NAVI_REQUIRE_SPEC=1
//      turns that into a failure);
//   2. src/schema.d.ts vs openapi-typescript run on openapi.json (into a temp file).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { generate } from "./gen.mjs";
import { root, specText } from "./spec.mjs";

let failed = false;
const read = (p) => readFileSync(p, "utf8");

function firstDifference(a, b) {
  const la = a.split("\n");
  const lb = b.split("\n");
  for (let i = 0; i < Math.max(la.length, lb.length); i++) {
    if (la[i] !== lb[i]) return `line ${i + 1}:\n  committed: ${la[i] ?? "<end>"}\n  fresh:     ${lb[i] ?? "<end>"}`;
  }
  return "";
}

if (!process.argv.includes("--types-only")) {
  let fresh;
  try {
    fresh = specText();
  } catch (e) {
    const msg = `spec: not checked (${String(e.message).split("\n")[0]})`;
    if (process.env.NAVI_REQUIRE_SPEC === "1") {
      console.error(msg);
      failed = true;
    } else console.warn(msg);
  }
  if (fresh !== undefined) {
    const committed = read(join(root, "openapi.json"));
    if (committed !== fresh) {
      console.error(`openapi.json is stale: run \`npm run spec && npm run gen\`\n${firstDifference(committed, fresh)}`);
      failed = true;
    } else console.log("openapi.json: matches the app");
  }
}

const tmp = mkdtempSync(join(tmpdir(), "navi-gen-"));
try {
  const out = join(tmp, "schema.d.ts");
  generate(out);
  const committed = read(join(root, "src", "schema.d.ts"));
  const fresh = read(out);
  if (committed !== fresh) {
    console.error(`src/schema.d.ts is stale: run \`npm run gen\`\n${firstDifference(committed, fresh)}`);
    failed = true;
  } else console.log("src/schema.d.ts: matches openapi.json");
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
