// Against a running service: skipped unless NAVI_URL and NAVI_TOKEN are set.
//   NAVI_URL=http://127.0.0.1:8000 NAVI_TOKEN=… npm run test:live
// (or `npm run test:live:service`, which starts a service and the fake model first).
// NAVI_SCRIPTED_MODEL=1: the model is test/fake_ollama.py, whose replies follow the
// request, so the tool rounds can be asserted too.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { Navi } from "../dist/index.js";

const { NAVI_URL, NAVI_TOKEN } = process.env;
const skip = !(NAVI_URL && NAVI_TOKEN) && "NAVI_URL and NAVI_TOKEN are not set";
const scripted = process.env.NAVI_SCRIPTED_MODEL === "1";

/** The README's first ```js / ```ts block: the quickstart. */
export function quickstartBlock(markdown) {
  const m = /^```(?:js|javascript|ts|typescript|mjs)[^\n]*\n([\s\S]*?)^```/m.exec(markdown);
  if (!m) throw new Error("README.md has no js/ts code block");
  return m[1];
}

async function collect(stream) {
  const events = [];
  for await (const ev of stream) events.push(ev);
  return events;
}

describe("live service", { skip }, () => {
  const navi = new Navi({ url: NAVI_URL ?? "", token: NAVI_TOKEN });

  test("the README quickstart runs as it is", () => {
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    // Inside the package, so that `import … from "navi-client"` resolves to this package
    // (a self-reference through package.json's "exports").
    const file = fileURLToPath(new URL(`./.quickstart-${process.pid}.tmp.mjs`, import.meta.url));
    writeFileSync(file, quickstartBlock(readme));
    try {
      const run = spawnSync(process.execPath, [file], {
        encoding: "utf8",
        env: process.env,
        timeout: 60_000,
      });
      assert.equal(run.status, 0, `quickstart failed:\n${run.stdout}\n${run.stderr}`);
      assert.match(run.stdout, /session [0-9a-f-]{36}: [1-9]\d* hit\(s\)/, run.stdout);
      assert.match(run.stdout, /6543/);
    } finally {
      rmSync(file, { force: true });
    }
  });

  test("an agent round trip: a session, a streamed turn read to done", async () => {
    const session = await navi.sessions.create({ name: "ts live round trip" });
    try {
      const turn = navi.streamTurn(session.id, "Hello! Who are you?");
      const events = await collect(turn);
      const names = events.map((e) => e.event);
      assert.equal(turn.error, undefined, JSON.stringify(turn.error));
      assert.equal(names.at(-1), "done", names.join(" "));
      assert.ok(names.includes("usage"), names.join(" "));
      const done = events.at(-1);
      assert.equal(done.status, "completed");
      assert.equal(done.rounds, 1);
      const tokens = events.filter((e) => e.event === "token").map((e) => e.text).join("");
      assert.equal(tokens, done.content);
      if (scripted) assert.equal(done.content, "Hello from the fake model.");

      // the turn is stored: the user's message and the answer, in order
      const history = await navi.messages.history(session.id, { limit: 10 });
      const tail = history.messages.slice(-2).map((m) => [m.role, m.content]);
      assert.deepEqual(tail, [
        ["user", "Hello! Who are you?"],
        ["assistant", done.content],
      ]);
    } finally {
      await navi.sessions.delete(session.id);
    }
  });

  test("a built-in tool round, then a client tool handed back and resumed", { skip: !scripted && "NAVI_SCRIPTED_MODEL is not 1" }, async () => {
    const session = await navi.sessions.create({ name: "ts live tools" });
    try {
      const turn = navi.streamTurn(session.id, "Please use the memory_search tool to find the port.");
      const names = (await collect(turn)).map((e) => e.event);
      assert.deepEqual(
        names.filter((n) => n !== "token" && n !== "thinking"),
        ["usage", "tool_call", "tool_result", "usage", "done"],
      );
      assert.equal(turn.done.tool_call_count, 1);
      assert.equal(turn.done.rounds, 2);

      const tools = [{
        type: "function",
        function: {
          name: "run_shell",
          description: "run a shell command",
          parameters: { type: "object", properties: { cmd: { type: "string" } } },
        },
      }];
      const asked = navi.streamTurn(session.id, { message: { content: "call run_shell please" }, tools });
      const final = await asked.final();
      assert.equal(final.status, "requires_action");
      assert.equal(asked.requiresAction, true);
      const [call] = asked.pending;
      assert.equal(call.name, "run_shell");
      assert.deepEqual(call.arguments, { cmd: "ls" });

      const resumed = navi.streamTurn(session.id, {
        tool_results: [{ tool_call_id: call.id, content: "a.txt b.txt" }],
        tools,
      });
      const end = await resumed.final();
      assert.equal(end.status, "completed");
      assert.equal(resumed.content, "Done: a.txt b.txt.");
    } finally {
      await navi.sessions.delete(session.id);
    }
  });

  test("the rest of the surface, one call each", async () => {
    const me = await navi.me();
    const session = await navi.sessions.create({ name: "ts live surface" });
    const id = session.id;
    try {
      assert.equal((await navi.sessions.patch(id, { pinned: true })).pinned, true);
      assert.equal((await navi.sessions.get(id)).name, "ts live surface");
      const page = await navi.sessions.list({ limit: 50 });
      assert.ok(page.items.some((s) => s.id === id));
      await navi.messages.append(id, [
        { role: "user", content: "The blue deploy key lives in vault path ops/deploy." },
        { role: "assistant", content: "Got it." },
      ]);
      const prepared = await navi.prepare(id, { message: { role: "user", content: "where is the key?" } });
      assert.equal(prepared.session_id, id);
      assert.ok(prepared.context.length >= 2 && prepared.tokens > 0);
      // two messages are all "recent": nothing to compact is a 409 with the house body
      await navi.compact(id).then(
        (out) => assert.equal(out.session_id, id),
        (e) => assert.equal(e.error, "conflict", e.message),
      );
      assert.ok((await navi.sessions.context(id)).messages.length >= 1);

      const key = `ts-live-${Date.now()}`;
      const saved = await navi.facts.save({ category: "ts_live", key, value: "the vault path is ops/deploy" });
      assert.equal(saved.key, key);
      const facts = await navi.facts.list({ category: "ts_live", key });
      assert.deepEqual(facts.items.map((f) => f.key), [key]);
      assert.ok((await navi.facts.search("vault path")).items.length >= 1);
      await navi.facts.delete(key, { category: "ts_live" });

      await navi.scratchpad.put(id, "plan", "1. find the key");
      assert.equal((await navi.scratchpad.get(id, "plan")).value, "1. find the key");
      assert.ok((await navi.scratchpad.list(id)).items.some((s) => s.section === "plan"));
      await navi.scratchpad.delete(id, "plan");

      const searched = await navi.tools.memorySearch({ query: "vault path" }, { sessionId: id });
      assert.equal(typeof searched.text, "string");
      const listed = await navi.tools.call("memory", { action: "list" }, { sessionId: id });
      assert.equal(typeof listed.text, "string");

      const up = await navi.files.upload(id, [{ name: "notes.txt", data: "hello file", type: "text/plain" }]);
      assert.equal(up.files.length, 1);
      const stored = up.files[0].name;
      assert.ok((await navi.files.list(id)).items.some((f) => f.name === stored));
      assert.equal(await (await navi.files.download(id, stored)).text(), "hello file");

      const share = await navi.sessions.share(id);
      const shared = await new Navi({ url: NAVI_URL }).shared.get(share.token);
      assert.ok(shared.messages.length >= 2);

      const dry = await navi.memory.forget({ text: "ops/deploy", dry_run: true });
      assert.equal(dry.dry_run, true);
      assert.ok(dry.total >= 1);

      const history = await navi.messages.history(id, { limit: 1 });
      if (history.next_before_seq != null) {
        const older = await navi.messages.history(id, { beforeSeq: history.next_before_seq, limit: 1 });
        assert.ok(older.messages[0].sequence_number < history.messages[0].sequence_number);
      }
    } finally {
      await navi.sessions.delete(id);
    }
    assert.ok(me.id);
  });

  test("admin: a user and its token, its export imported into another account", async (t) => {
    if (!(await navi.me()).is_admin) return t.skip("NAVI_TOKEN is not an admin's");
    const stamp = Date.now();
    const alice = await navi.admin.users.create({ name: `ts-live-a-${stamp}` });
    let bob;
    try {
      const issued = await navi.admin.users.issueToken(alice.id, "ts live");
      const asAlice = new Navi({ url: NAVI_URL, token: issued.token });
      assert.equal((await asAlice.me()).id, alice.id);
      const s = await asAlice.sessions.create({ name: "to move" });
      await asAlice.messages.append(s.id, [{ role: "user", content: "moving house" }]);
      const tokens = await asAlice.tokens.list();
      assert.ok(tokens.items.some((x) => x.id === issued.id));
      const records = [];
      for await (const r of asAlice.account.exportRecords()) records.push(r);
      assert.ok(records.length >= 2);
      const ndjson = records.map((r) => JSON.stringify(r)).join("\n") + "\n";
      await navi.admin.users.delete(alice.id); // session ids are kept: free them first

      bob = await navi.admin.users.create({ name: `ts-live-b-${stamp}` });
      const asBob = new Navi({ url: NAVI_URL, token: (await navi.admin.users.issueToken(bob.id)).token });
      const report = await asBob.account.import(ndjson);
      assert.equal(report.user_id, bob.id);
      assert.equal(report.records.session, 1);
      const moved = await asBob.sessions.get(s.id);
      assert.equal(moved.name, "to move");
    } finally {
      await navi.admin.users.delete(alice.id).catch(() => undefined);
      if (bob) await navi.admin.users.delete(bob.id).catch(() => undefined);
    }
  });

  test("errors come back as NaviError with the service's body", async () => {
    await assert.rejects(
      navi.sessions.get("00000000-0000-4000-8000-000000000000"),
      (e) => e.name === "NaviError" && e.status === 404 && e.error === "not_found",
    );
  });
});
