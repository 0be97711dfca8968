// The published declarations type-check a typical use (test/usage.ts) under `strict`.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { test } from "node:test";

test("dist/*.d.ts: typed requests, answers and turn events", () => {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const project = fileURLToPath(new URL("./tsconfig.json", import.meta.url));
  const run = spawnSync(process.execPath, [tsc, "-p", project], { encoding: "utf8" });
  assert.equal(run.status, 0, run.stdout + run.stderr);
});
