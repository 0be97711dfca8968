// Unit tests of the client over a fake fetch: no service needed.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  LsnTracker,
  Navi,
  NaviError,
  SseParser,
  parseLsn,
  parseRetryAfter,
} from "../dist/index.js";
import { answers, chunked, fakeFetch, json, sse, splits } from "./helpers.mjs";

const URL_ = "http://navi.test/base/";
const SID = "6f1c2d3e-0000-4000-8000-000000000001";

const namedBlob = (data, name) =>
  typeof File === "function" ? new File([data], name) : Object.assign(new Blob([data]), { name });

function client(fetch, options = {}) {
  return new Navi({ url: URL_, token: "tok", fetch, ...options });
}

// --------------------------------------------------------------------- SSE parsing

const EVENTS = [
  { event: "compression", phase: "started", reason: "preturn", context_tokens: 3190, max_context_tokens: 4096, messages_before: null, messages_after: null, method: null },
  { event: "recall", chunk_ids: [4, 9], chars: 812 },
  { event: "thinking", text: "Der Nutzer fragt … " },
  { event: "token", text: "Café → 🚀 " },
  { event: "token", text: "line one\nline two" },
  { event: "usage", round: 1, model: "qwen3:8b", prompt_eval_count: 2911, eval_count: 14 },
  { event: "tool_call", id: "call_1", name: "memory_search", arguments: { query: "déploiement" }, builtin: true },
  { event: "tool_result", id: "call_1", name: "memory_search", content: "0 hit(s)", is_error: false },
  { event: "token", text: "Fertig." },
  { event: "usage", round: 2, model: "qwen3:8b", prompt_eval_count: 1302, eval_count: 3 },
  { event: "done", status: "completed", content: "Fertig.", rounds: 2, tool_call_count: 1, elapsed_seconds: 3.4, pending: [] },
];

/** The service's framing (app/domain/agents/stream.py), with `eol` as line end. */
function frame(events, eol = "\n") {
  return events.map((e) => `event: ${e.event}${eol}data: ${JSON.stringify(e)}${eol}${eol}`).join("");
}

async function collect(stream) {
  const out = [];
  for await (const ev of stream) out.push(ev);
  return out;
}

describe("SSE", () => {
  test("every cut of the byte stream gives the same events (UTF-8 and CRLF split too)", async () => {
    for (const eol of ["\n", "\r\n", "\r"]) {
      const bytes = new TextEncoder().encode(frame(EVENTS, eol));
      let cuts = 0;
      for (const pieces of splits(bytes)) {
        const navi = client(answers(() => sse(pieces)));
        const got = await collect(navi.streamTurn(SID, "hi"));
        assert.deepEqual(got, EVENTS, `eol ${JSON.stringify(eol)}, pieces ${pieces.map((p) => p.length)}`);
        cuts++;
      }
      assert.ok(cuts > 100);
    }
  });

  test("one byte at a time", async () => {
    const bytes = new TextEncoder().encode(frame(EVENTS, "\r\n"));
    const pieces = Array.from(bytes, (b) => Uint8Array.of(b));
    const stream = client(answers(() => sse(pieces))).streamTurn(SID, "hi");
    assert.deepEqual(await collect(stream), EVENTS);
    assert.equal(stream.content, "Fertig.");
    assert.equal(stream.thinking, "Der Nutzer fragt … ");
    assert.equal(stream.done.status, "completed");
    assert.equal(stream.requiresAction, false);
  });

  test("the parser: comments, multi-line data, fields without a space, unnamed events", () => {
    const p = new SseParser();
    const got = [
      ...p.push(": keep-alive\n\nevent:token\ndata:{\"a\":\ndata: 1}\n"),
      ...p.push("\nid: 7\ndata: x\n\n"),
      ...p.push("event: token\ndata: never closed"),
      ...p.end(),
    ];
    assert.deepEqual(got, [
      { event: "token", data: '{"a":\n1}' },
      { event: "message", data: "x", id: "7" },
    ]);
  });

  test("events without `event` in their data get it from the SSE name", async () => {
    const body = 'event: token\ndata: {"text":"a"}\n\nevent: done\ndata: {"status":"completed","content":"a","rounds":1,"tool_call_count":0,"elapsed_seconds":0.1,"pending":[]}\n\n';
    const got = await collect(client(answers(() => sse([body]))).streamTurn(SID, "hi"));
    assert.deepEqual(got.map((e) => e.event), ["token", "done"]);
  });

  test("the request: POST .../turns with Accept: text/event-stream and the message", async () => {
    const fetch = answers(() => sse([frame(EVENTS.slice(-1))]));
    await collect(client(fetch).streamTurn(SID, { message: { content: "deploy it" } }));
    const [call] = fetch.calls;
    assert.equal(call.method, "POST");
    assert.equal(call.url, `http://navi.test/base/sessions/${SID}/turns`);
    assert.equal(call.headers.get("accept"), "text/event-stream");
    assert.equal(call.headers.get("authorization"), "Bearer tok");
    assert.deepEqual(JSON.parse(call.body), { message: { content: "deploy it" } });
  });

  test("requires_action: the pending calls, then the resume carries the tool results", async () => {
    const done = { event: "done", status: "requires_action", content: "Let me look.", rounds: 1, tool_call_count: 1, elapsed_seconds: 0.8, pending: [{ id: "call_9", name: "run_shell", arguments: { cmd: "ls" } }] };
    const fetch = fakeFetch((_c, i) =>
      i === 0
        ? sse([frame([{ event: "tool_call", id: "call_9", name: "run_shell", arguments: { cmd: "ls" }, builtin: false }, done])])
        : json({ session_id: SID, status: "completed", content: "Two files.", thinking: null, rounds: 2, tool_call_count: 1, elapsed_seconds: 1, pending: [], events: [] }),
    );
    const navi = client(fetch);
    const tools = [{ type: "function", function: { name: "run_shell", parameters: { type: "object" } } }];
    const stream = navi.streamTurn(SID, { message: { content: "list my files" }, tools });
    const final = await stream.final();
    assert.equal(final.status, "requires_action");
    assert.equal(stream.requiresAction, true);
    assert.deepEqual(stream.pending.map((p) => p.id), ["call_9"]);
    const out = await navi.resumeTurn(SID, [{ tool_call_id: "call_9", content: "a.txt b.txt" }], { tools });
    assert.equal(out.status, "completed");
    assert.deepEqual(JSON.parse(fetch.calls[1].body), {
      tool_results: [{ tool_call_id: "call_9", content: "a.txt b.txt" }],
      tools,
    });
    assert.equal(fetch.calls[1].headers.get("accept"), "application/json");
  });

  test("an error event ends the stream; it is recorded, not thrown", async () => {
    const err = { event: "error", error: "llm_unavailable", detail: "connection refused", status: 503 };
    const stream = client(answers(() => sse([frame([EVENTS[3], err, EVENTS[10]])]))).streamTurn(SID, "hi");
    const got = await collect(stream);
    assert.deepEqual(got.map((e) => e.event), ["token", "error"]);
    assert.equal(stream.error.error, "llm_unavailable");
    assert.equal(stream.done, undefined);
  });

  test("a stream cut before done/error throws incomplete_stream", async () => {
    const stream = client(answers(() => sse([frame(EVENTS.slice(0, 4))]))).streamTurn(SID, "hi");
    await assert.rejects(collect(stream), (e) => e instanceof NaviError && e.error === "incomplete_stream");
  });

  test("leaving the loop early cancels the body (the service interrupts the turn)", async () => {
    let cancelled = false;
    const pieces = frame(EVENTS).split(/(?<=\n\n)/);
    const fetch = answers(() => sse(pieces, { onCancel: () => (cancelled = true) }));
    for await (const ev of client(fetch).streamTurn(SID, "hi")) {
      if (ev.event === "token") break;
    }
    assert.equal(cancelled, true);
  });

  test("close() mid-stream ends the loop quietly and aborts the request", async () => {
    let signal;
    const fetch = fakeFetch((call) => {
      signal = call.init.signal;
      // a stream that delivers one event, then waits (as a model thinking would)
      const enc = new TextEncoder();
      const body = new ReadableStream({
        start(controller) {
          controller.enqueue(enc.encode(frame([EVENTS[3]])));
          signal.addEventListener("abort", () => controller.error(signal.reason));
        },
      });
      return new Response(body, { headers: { "Content-Type": "text/event-stream" } });
    });
    const stream = client(fetch).streamTurn(SID, "hi");
    const got = [];
    for await (const ev of stream) {
      got.push(ev.event);
      stream.close();
    }
    assert.deepEqual(got, ["token"]);
    assert.equal(signal.aborted, true);
  });

  test("a non-2xx answer to a streamed turn is thrown before any event", async () => {
    const fetch = answers(json({ error: "not_found", detail: "no session x" }, 404));
    await assert.rejects(collect(client(fetch).streamTurn(SID, "hi")), (e) => e.status === 404 && e.error === "not_found");
  });

  test("a stream is read once", async () => {
    const stream = client(answers(() => sse([frame(EVENTS)]))).streamTurn(SID, "hi");
    await collect(stream);
    await assert.rejects(collect(stream), /read once/);
  });
});

// ---------------------------------------------------------------------- errors

describe("errors", () => {
  test("non-2xx → NaviError with status, error and detail from the body", async () => {
    const navi = client(answers(json({ error: "not_found", detail: `no session ${SID}` }, 404, { "X-Request-ID": "req-1" })));
    const e = await navi.sessions.get(SID).catch((x) => x);
    assert.ok(e instanceof NaviError);
    assert.ok(e instanceof Error);
    assert.equal(e.name, "NaviError");
    assert.equal(e.status, 404);
    assert.equal(e.error, "not_found");
    assert.equal(e.detail, `no session ${SID}`);
    assert.equal(e.requestId, "req-1");
    assert.match(e.message, /^404 not_found: no session/);
  });

  test("extra fields of the body stay reachable (context_too_large)", async () => {
    const body = { error: "context_too_large", detail: "too big", tokens: 9000, limit: 4096 };
    const e = await client(answers(json(body, 422))).prepare(SID, {}).catch((x) => x);
    assert.equal(e.error, "context_too_large");
    assert.deepEqual(e.body, body);
  });

  test("a body that is not JSON: http_<status> and its text", async () => {
    const navi = client(answers(new Response("<html>Bad Gateway</html>", { status: 502 })));
    const e = await navi.me().catch((x) => x);
    assert.equal(e.status, 502);
    assert.equal(e.error, "http_502");
    assert.equal(e.detail, "<html>Bad Gateway</html>");
  });

  test("2xx answers: JSON decoded, 204 as undefined", async () => {
    const fetch = answers(new Response(null, { status: 204 }));
    assert.equal(await client(fetch).sessions.delete(SID), undefined);
    assert.equal(fetch.calls[0].method, "DELETE");
  });

  test("health answers its 503 body instead of throwing", async () => {
    const h = await client(answers(json({ status: "degraded", database: false }, 503))).health();
    assert.equal(h.status, "degraded");
  });
});

// ----------------------------------------------------------------- 503 retries

describe("503 and Retry-After", () => {
  const unavailable = (after) =>
    json({ error: "unavailable", detail: "the database is unavailable; retry later" }, 503, after === undefined ? {} : { "Retry-After": after });

  test("retried after the wait Retry-After asks for", async () => {
    const fetch = answers(unavailable("0.2"), json({ id: SID }, 201));
    const started = Date.now();
    const s = await client(fetch).sessions.create({ name: "x" });
    assert.equal(s.id, SID);
    assert.equal(fetch.calls.length, 2);
    assert.ok(Date.now() - started >= 180, "waited");
    assert.equal(fetch.calls[1].body, fetch.calls[0].body, "same body again");
  });

  test("bounded: maxRetries retries, then the NaviError", async () => {
    const fetch = answers(unavailable("0"));
    const e = await client(fetch, { maxRetries: 3 }).sessions.list().catch((x) => x);
    assert.equal(fetch.calls.length, 4);
    assert.equal(e.status, 503);
    assert.equal(e.error, "unavailable");
    assert.equal(e.retryAfter, 0);
  });

  test("a wait longer than maxRetryWaitMs is not retried early: thrown at once", async () => {
    const fetch = answers(unavailable("30"), json({}));
    const e = await client(fetch, { maxRetryWaitMs: 5000 }).me().catch((x) => x);
    assert.equal(fetch.calls.length, 1);
    assert.equal(e.retryAfter, 30);
  });

  test("a 503 without Retry-After (a turn's llm_unavailable) is not retried", async () => {
    const fetch = answers(json({ error: "llm_unavailable", detail: "down" }, 503), json({}));
    const e = await client(fetch).turn(SID, "hi").catch((x) => x);
    assert.equal(fetch.calls.length, 1);
    assert.equal(e.error, "llm_unavailable");
  });

  test("maxRetries: 0 never retries; other statuses are never retried", async () => {
    let fetch = answers(unavailable("0"), json({}));
    await assert.rejects(client(fetch, { maxRetries: 0 }).me());
    assert.equal(fetch.calls.length, 1);
    fetch = answers(json({ error: "internal", detail: "x" }, 500, { "Retry-After": "0" }), json({}));
    await assert.rejects(client(fetch).me());
    assert.equal(fetch.calls.length, 1);
  });

  test("the wait is abortable", async () => {
    const fetch = answers(unavailable("5"), json({}));
    const ac = new AbortController();
    const p = client(fetch).turn(SID, "hi", { signal: ac.signal });
    // the turn's 503 here has Retry-After: it waits, and the abort ends the wait
    setTimeout(() => ac.abort(new Error("stop")), 20);
    await assert.rejects(p, /stop/);
    assert.equal(fetch.calls.length, 1);
  });

  test("parseRetryAfter: seconds and HTTP dates", () => {
    assert.equal(parseRetryAfter("5"), 5);
    assert.equal(parseRetryAfter(null), undefined);
    assert.equal(parseRetryAfter("soon"), undefined);
    const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
    assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:28:07 GMT", now), 7);
    assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:27:00 GMT", now), 0);
  });
});

// ------------------------------------------------------------ read-your-writes

describe("Navi-Write-LSN → Navi-Min-LSN", () => {
  test("the newest write position is echoed on the following requests", async () => {
    const lsns = [undefined, "0/16B3748", "0/1000", "1/0", undefined];
    const fetch = fakeFetch((_c, i) => json({}, 200, lsns[i] ? { "Navi-Write-LSN": lsns[i] } : {}));
    const navi = client(fetch);
    for (let i = 0; i < 5; i++) await navi.me();
    const sent = fetch.calls.map((c) => c.headers.get("navi-min-lsn"));
    // nothing before the first write; never older than the newest; X/Y compared as numbers
    assert.deepEqual(sent, [null, null, "0/16B3748", "0/16B3748", "1/0"]);
    assert.equal(navi.lsn, "1/0");
  });

  test("seen on error answers and streams too; a malformed header is ignored", async () => {
    const fetch = fakeFetch((_c, i) => {
      if (i === 0) return json({ error: "conflict", detail: "x" }, 409, { "Navi-Write-LSN": "A/10" });
      if (i === 1) return new Response(chunked([frame(EVENTS.slice(-1))]), { headers: { "Content-Type": "text/event-stream", "Navi-Write-LSN": "A/20" } });
      if (i === 2) return json({}, 200, { "Navi-Write-LSN": "not-an-lsn" });
      return json({});
    });
    const navi = client(fetch);
    await assert.rejects(navi.me());
    await collect(navi.streamTurn(SID, "hi"));
    await navi.me();
    await navi.me();
    assert.deepEqual(fetch.calls.map((c) => c.headers.get("navi-min-lsn")), [null, "A/10", "A/20", "A/20"]);
  });

  test("minLsn starts the tracker; parseLsn compares high then low word", () => {
    const navi = client(answers(json({})), { minLsn: "3/FF" });
    assert.equal(navi.lsn, "3/FF");
    assert.ok(parseLsn("1/0") > parseLsn("0/FFFFFFFF"));
    assert.equal(parseLsn("1/2/3"), undefined);
    assert.equal(parseLsn("123456789/0"), undefined);
    const t = new LsnTracker();
    assert.equal(t.observe("0/10"), true);
    assert.equal(t.observe("0/F"), false);
    assert.equal(t.current, "0/10");
  });
});

// ------------------------------------------------------------------ requests

describe("requests", () => {
  test("URL, query, headers and bodies of the resources", async () => {
    const fetch = answers(json({}));
    const navi = client(fetch);
    await navi.sessions.list({ limit: 5, offset: 10, search: undefined });
    await navi.messages.history(SID, { beforeSeq: 42, limit: 3 });
    await navi.messages.append(SID, [{ role: "user", content: "hi" }], { usage: { model: "m", prompt_eval_count: 10 } });
    await navi.memory.search("staging port");
    await navi.tools.call("memory_search", { query: "q" }, { sessionId: SID });
    await navi.facts.delete("db port", { category: "infra" });
    await navi.scratchpad.put(SID, "plan/a", "step 1");
    await navi.sessions.matches({ q: "port", session_id: ["a", "b"] });
    const [list, history, append, search, tool, fact, sketch, matches] = fetch.calls;
    assert.equal(list.url, "http://navi.test/base/sessions?limit=5&offset=10");
    assert.equal(history.url, `http://navi.test/base/sessions/${SID}/messages?before_seq=42&limit=3`);
    assert.deepEqual(JSON.parse(append.body), { messages: [{ role: "user", content: "hi" }], usage: { model: "m", prompt_eval_count: 10 } });
    assert.equal(append.headers.get("content-type"), "application/json");
    assert.deepEqual(JSON.parse(search.body), { query: "staging port" });
    assert.equal(tool.url, "http://navi.test/base/tools/memory_search");
    assert.equal(tool.headers.get("x-navi-session-id"), SID);
    assert.equal(fact.url, "http://navi.test/base/memory/facts/db%20port?category=infra");
    assert.equal(sketch.url, `http://navi.test/base/sessions/${SID}/scratchpad/plan%2Fa`);
    assert.equal(sketch.method, "PUT");
    assert.equal(matches.url, "http://navi.test/base/sessions/matches?q=port&session_id=a&session_id=b");
  });

  test("no token: no Authorization header (local mode)", async () => {
    const fetch = answers(json({}));
    await new Navi({ url: "http://x", fetch }).me();
    assert.equal(fetch.calls[0].headers.get("authorization"), null);
  });

  test("the global fetch is used when none is given", async () => {
    const saved = globalThis.fetch;
    const fetch = answers(json({ id: "u" }));
    globalThis.fetch = fetch;
    try {
      assert.deepEqual(await new Navi({ url: "http://x" }).me(), { id: "u" });
    } finally {
      globalThis.fetch = saved;
    }
    assert.equal(fetch.calls.length, 1);
  });

  test("upload: multipart `files` parts", async () => {
    const fetch = answers(json({ files: [], message_block: "" }, 201));
    await client(fetch).files.upload(SID, [{ name: "a.txt", data: "hello" }, namedBlob("x", "b.bin")]);
    const form = fetch.calls[0].body;
    assert.ok(form instanceof FormData);
    assert.deepEqual(form.getAll("files").map((f) => f.name), ["a.txt", "b.bin"]);
  });

  test("exportRecords: NDJSON lines across chunks", async () => {
    const body = chunked(['{"type":"user","id":"u"}\n{"ty', 'pe":"session"}\n', '{"type":"end"}']);
    const fetch = answers(() => new Response(body, { headers: { "Content-Type": "application/x-ndjson" } }));
    const records = [];
    for await (const r of client(fetch).account.exportRecords()) records.push(r.type);
    assert.deepEqual(records, ["user", "session", "end"]);
  });
});
