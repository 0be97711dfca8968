// The live tests with a service of their own: the fake Ollama (test/fake_ollama.py) and
// `python -m app.cli serve` (embedded PostgreSQL in a fresh temp directory, auth on, an
// admin token), then `node --test test/live.test.mjs` against them, then both stopped.
//   npm run test:live:service
// NAVI_PYTHON: the repository's Python (default <repo>/.venv/bin/python).
// NAVI_LIVE_DATABASE_URL: an external database instead of the embedded one.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { python, repo, root } from "./spec.mjs";

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(url, proc, seconds, ready = (r) => r.ok) {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`${proc.spawnargs.join(" ")} exited (${proc.exitCode})`);
    try {
      if (await ready(await fetch(url))) return;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  throw new Error(`${url}: not ready after ${seconds} s`);
}

function stop(proc, seconds = 30) {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => proc.kill("SIGKILL"), seconds * 1000);
    proc.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    proc.kill("SIGTERM"); // the service stops its embedded PostgreSQL on the way out
  });
}

const dir = mkdtempSync(join(tmpdir(), "navi-ts-live-"));
const logOf = (name) => join(dir, `${name}.log`);
const token = `live-${randomBytes(24).toString("hex")}`;
let fake;
let serve;
let status = 1;
try {
  const fakePort = await freePort();
  const out = openSync(logOf("fake-ollama"), "a");
  fake = spawn(python(), [join(root, "test", "fake_ollama.py"), "--port", String(fakePort)], {
    cwd: repo,
    stdio: ["ignore", out, out],
  });
  const ollama = `http://127.0.0.1:${fakePort}`;
  await waitFor(`${ollama}/api/version`, fake, 30);

  const port = await freePort();
  const env = {
    ...process.env,
    NAVI_AUTH_ENABLED: "true",
    NAVI_ADMIN_TOKEN: token,
    WEB_CONCURRENCY: "1",
    NAVI_DATA_DIR: join(dir, "data"),
    OLLAMA_HOST: ollama,
    OLLAMA_MODEL: "fake-chat:latest",
    EMBEDDING_PROVIDER: "ollama",
    EMBEDDING_MODEL: "fake-embed:latest",
    LOG_JSON: "false",
  };
  delete env.DATABASE_URL;
  delete env.DATABASE_REPLICA_URL;
  delete env.NAVI_PROFILES_FILE;
  delete env.EMBEDDING_DIM;
  if (process.env.NAVI_LIVE_DATABASE_URL) env.DATABASE_URL = process.env.NAVI_LIVE_DATABASE_URL;
  const log = openSync(logOf("serve"), "a");
  serve = spawn(python(), ["-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", String(port)], {
    cwd: repo,
    env,
    stdio: ["ignore", log, log],
  });
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  await waitFor(`${url}/health`, serve, 180, async (r) => (await r.json()).database === true);
  console.log(`service ready at ${url} in ${((Date.now() - started) / 1000).toFixed(1)} s (fake Ollama ${ollama})`);

  const tests = spawn(process.execPath, ["--test", join(root, "test", "live.test.mjs")], {
    cwd: root,
    env: { ...process.env, NAVI_URL: url, NAVI_TOKEN: token, NAVI_SCRIPTED_MODEL: "1" },
    stdio: "inherit",
  });
  status = await new Promise((resolve) => tests.once("exit", (code) => resolve(code ?? 1)));
} catch (e) {
  console.error(String(e?.stack ?? e));
} finally {
  await stop(serve);
  await stop(fake, 5);
  if (status !== 0) {
    for (const name of ["serve", "fake-ollama"]) {
      try {
        const text = readFileSync(logOf(name), "utf8").split("\n").slice(-40).join("\n");
        console.error(`--- ${name} log (last lines) ---\n${text}`);
      } catch {
        // no log
      }
    }
  }
  rmSync(dir, { recursive: true, force: true });
}
process.exit(status);
