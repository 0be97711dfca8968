// dist/ is committed (so `npm install ./clients/typescript` needs no TypeScript and runs no
// build): this check builds it again (scripts/build.mjs) and fails when the result differs
// from the dist/ that was there, i.e. when src/ changed and dist/ was not rebuilt. It leaves
// the fresh build in dist/: commit it.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");

function snapshot() {
  const files = new Map();
  if (!existsSync(dist)) return files;
  for (const entry of readdirSync(dist, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath ?? entry.path, entry.name);
    files.set(path.slice(dist.length + 1), readFileSync(path, "utf8"));
  }
  return files;
}

const before = snapshot();
execFileSync(process.execPath, [join(root, "scripts", "build.mjs")], { stdio: "inherit" });
const after = snapshot();
const differ = [...new Set([...before.keys(), ...after.keys()])]
  .sort()
  .filter((name) => before.get(name) !== after.get(name))
  .map((name) => `  dist/${name}: ${!before.has(name) ? "new" : !after.has(name) ? "gone" : "changed"}`);
if (differ.length) {
  console.error(
    `dist/ did not match a build of src/ (now rebuilt: commit clients/typescript/dist):\n${differ.join("\n")}`,
  );
  process.exit(1);
}
console.log(`dist/ matches a build of src/ (${after.size} files)`);
