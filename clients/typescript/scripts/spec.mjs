// openapi.json ← the service's OpenAPI document, written by the app itself (no server):
// `create_app().openapi_schema`, keys sorted, so the file only changes when the API does.
// The repository's Python: $NAVI_PYTHON, else <repo>/.venv/bin/python, else python3.
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const repo = join(root, "..", "..");

const CODE =
  "import json; from app.asgi import create_app; " +
  "print(json.dumps(create_app().openapi_schema.to_schema(), sort_keys=True, indent=1))";

export function python() {
  if (process.env.NAVI_PYTHON) return process.env.NAVI_PYTHON;
  for (const p of [join(repo, ".venv", "bin", "python"), join(repo, ".venv", "Scripts", "python.exe")]) {
    if (existsSync(p)) return p;
  }
  return "python3";
}

/** The document as the app in `repo` produces it (text, with its final newline). */
export function specText() {
  const run = spawnSync(python(), ["-c", CODE], { cwd: repo, encoding: "utf8", maxBuffer: 64 << 20 });
  if (run.error) throw run.error;
  if (run.status !== 0) throw new Error(`the OpenAPI document could not be made:\n${run.stderr}`);
  return run.stdout;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(join(root, "openapi.json"), specText());
  console.log("openapi.json written from the app in", repo);
}
