// tsc → dist/ (JS + declarations), then the generated src/schema.d.ts next to them:
// tsc never copies a hand-placed .d.ts, and dist/index.d.ts imports "./schema.js".
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
rmSync(join(root, "dist"), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" });
mkdirSync(join(root, "dist"), { recursive: true });
copyFileSync(join(root, "src", "schema.d.ts"), join(root, "dist", "schema.d.ts"));
