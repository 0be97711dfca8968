// src/schema.d.ts ← openapi-typescript (the pinned devDependency's CLI) on openapi.json.
// `--default-non-nullable false`: a field with a default stays optional in request bodies.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export function generate(output, input = join(root, "openapi.json")) {
  const pkg = createRequire(import.meta.url).resolve("openapi-typescript/package.json");
  const cli = join(dirname(pkg), "bin", "cli.js");
  const args = [cli, input, "--default-non-nullable", "false", "--output", output];
  const run = spawnSync(process.execPath, args, { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`openapi-typescript failed:\n${run.stdout}${run.stderr}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  generate(join(root, "src", "schema.d.ts"));
  console.log("src/schema.d.ts generated from openapi.json");
}
