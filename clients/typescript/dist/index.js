import { LsnTracker, NaviError, parseRetryAfter } from "./http.js";
import { readSse } from "./sse.js";
export { LsnTracker, NaviError, parseLsn, parseRetryAfter } from "./http.js";
export { SseParser, readSse } from "./sse.js";
// --------------------------------------------------------------------------- client
const SESSION_HEADER = "X-Navi-Session-Id";
const seg = (v) => encodeURIComponent(String(v));
function sleep(ms, signal) {
    return new Promise((resolve, reject) => {
        if (signal?.aborted)
            return reject(signal.reason);
        const timer = setTimeout(() => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
        }, ms);
        const onAbort = () => {
            clearTimeout(timer);
            reject(signal?.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
    });
}
function replayable(body) {
    return !(typeof ReadableStream !== "undefined" && body instanceof ReadableStream);
}
/** The Navi service: `new Navi({ url, token })`, then `navi.sessions.create()` and so on. */
export class Navi {
    url;
    maxRetries;
    maxRetryWaitMs;
    token;
    fetchImpl;
    extraHeaders;
    lsnTracker;
    constructor(options) {
        if (!options?.url)
            throw new TypeError("Navi: `url` is required");
        this.url = options.url.replace(/\/+$/, "");
        this.token = options.token || undefined;
        const f = options.fetch ?? globalThis.fetch;
        if (typeof f !== "function") {
            throw new TypeError("Navi: no global fetch (Node >= 18 or a browser); pass `fetch`");
        }
        // called unbound: a browser's fetch throws when called as a method of another object
        this.fetchImpl = options.fetch ? f : (input, init) => globalThis.fetch(input, init);
        this.maxRetries = Math.max(0, options.maxRetries ?? 2);
        this.maxRetryWaitMs = Math.max(0, options.maxRetryWaitMs ?? 10_000);
        this.extraHeaders = { ...(options.headers ?? {}) };
        this.lsnTracker = new LsnTracker(options.minLsn);
    }
    /** The newest `Navi-Write-LSN` seen (sent as `Navi-Min-LSN` with every request). */
    get lsn() {
        return this.lsnTracker.current;
    }
    /**
     * One request, answered as a `Response` with a 2xx status (or one of `okStatuses`);
     * anything else is thrown as a `NaviError`. A `503` with `Retry-After` is retried up to
     * `maxRetries` times, each after the wait it asks for (at most `maxRetryWaitMs`).
     */
    async request(method, path, options = {}) {
        const url = this.url + path + queryString(options.query);
        const headers = { Accept: "application/json", ...this.extraHeaders };
        if (this.token)
            headers.Authorization = `Bearer ${this.token}`;
        let body = options.body;
        if (options.json !== undefined) {
            headers["Content-Type"] = "application/json";
            body = JSON.stringify(options.json);
        }
        Object.assign(headers, options.headers);
        const init = { method, headers, body: body ?? null };
        if (options.signal)
            init.signal = options.signal;
        if (!replayable(body))
            init.duplex = "half"; // Node's fetch needs it for a stream body
        for (let attempt = 0;; attempt++) {
            const lsn = this.lsnTracker.current;
            if (lsn)
                headers["Navi-Min-LSN"] = lsn;
            const response = await this.fetchImpl(url, init);
            this.lsnTracker.observe(response.headers.get("navi-write-lsn"));
            if (response.ok || options.okStatuses?.includes(response.status))
                return response;
            if (response.status === 503 && attempt < this.maxRetries && replayable(body)) {
                const wait = parseRetryAfter(response.headers.get("retry-after"));
                // Only a 503 that names its wait is retried: the service's `unavailable` (its
                // database out of reach) carries Retry-After. A turn's `llm_unavailable` has none:
                // the turn stored the user's message before the model failed, and sending the
                // request again would store it twice.
                if (wait !== undefined && wait * 1000 <= this.maxRetryWaitMs) {
                    void response.body?.cancel().catch(() => undefined); // not awaited: may never settle
                    await sleep(wait * 1000, options.signal);
                    continue;
                }
            }
            throw await NaviError.fromResponse(response);
        }
    }
    /** `request`, then the JSON answer (undefined for a 204). */
    async json(method, path, options = {}) {
        const response = await this.request(method, path, options);
        if (response.status === 204)
            return undefined;
        const text = await response.text();
        return (text ? JSON.parse(text) : undefined);
    }
    // ----------------------------------------------------------------- resources
    sessions = {
        /** `POST /sessions` (profile `default` unless named). */
        create: (body = {}) => this.json("POST", "/sessions", { json: body }),
        /** `GET /sessions`: one page (`limit`, `offset`, `search`, `profile_id`, sorting). */
        list: (query = {}) => this.json("GET", "/sessions", { query: query }),
        get: (sessionId) => this.json("GET", `/sessions/${seg(sessionId)}`),
        /** `PATCH /sessions/{id}`: `name`, `pinned`, `profile_id`. */
        patch: (sessionId, patch) => this.json("PATCH", `/sessions/${seg(sessionId)}`, { json: patch }),
        delete: (sessionId) => this.json("DELETE", `/sessions/${seg(sessionId)}`),
        /** The stored context (`GET /sessions/{id}/context`). */
        context: (sessionId) => this.json("GET", `/sessions/${seg(sessionId)}/context`),
        /** Start the conversation over: the messages go, the memory stays. */
        reset: (sessionId) => this.json("POST", `/sessions/${seg(sessionId)}/reset`),
        /** Where a search's words occur in a session (`GET /sessions/matches`). */
        matches: (query) => this.json("GET", "/sessions/matches", { query: query }),
        /** A read-only share link of the session (`POST /sessions/{id}/share`). */
        share: (sessionId) => this.json("POST", `/sessions/${seg(sessionId)}/share`),
    };
    messages = {
        /**
         * `POST /sessions/{id}/messages`. With `usage` (what the model reported for the prompt
         * of the reply appended) the service calibrates and runs the post-turn check.
         */
        append: (sessionId, messages, options = {}) => this.json("POST", `/sessions/${seg(sessionId)}/messages`, {
            json: options.usage ? { messages, usage: options.usage } : { messages },
        }),
        /** `GET /sessions/{id}/messages`: the newest page, or the one before `beforeSeq`. */
        history: (sessionId, options = {}) => this.json("GET", `/sessions/${seg(sessionId)}/messages`, {
            query: { before_seq: options.beforeSeq, limit: options.limit },
        }),
    };
    /**
     * `POST /sessions/{id}/prepare`: the context to send for the next model call
     * (compressed first when needed). `{ mid_turn: true }` between tool rounds.
     */
    prepare(sessionId, body = {}) {
        return this.json("POST", `/sessions/${seg(sessionId)}/prepare`, { json: body });
    }
    /** `POST /sessions/{id}/compact`: compress now. */
    compact(sessionId, options = {}) {
        return this.json("POST", `/sessions/${seg(sessionId)}/compact`, { json: options });
    }
    /**
     * `POST /sessions/{id}/turns`, one JSON answer: Navi runs the whole turn (model,
     * built-in tools, compression). A string is the user's message.
     */
    turn(sessionId, request, options = {}) {
        return this.json("POST", `/sessions/${seg(sessionId)}/turns`, {
            json: turnBody(request),
            signal: options.signal,
        });
    }
    /**
     * Resume a turn that ended `requires_action`: one result per pending call (send the
     * same `tools` again). Streamed: `streamTurn(id, { tool_results, tools })`.
     */
    resumeTurn(sessionId, toolResults, options = {}) {
        const body = { tool_results: toolResults };
        if (options.tools)
            body.tools = options.tools;
        return this.turn(sessionId, body, options);
    }
    /**
     * `POST /sessions/{id}/turns` as Server-Sent Events: iterate the returned stream for
     * the turn's events (`for await (const ev of navi.streamTurn(id, "hi"))`), up to
     * `done` or `error`. Leaving the loop early closes the connection, which interrupts
     * the turn (what the model said so far is saved).
     */
    streamTurn(sessionId, request, options = {}) {
        const open = (signal) => this.request("POST", `/sessions/${seg(sessionId)}/turns`, {
            json: turnBody(request),
            headers: { Accept: "text/event-stream" },
            signal,
        });
        return new TurnStream(open, options.signal);
    }
    memory = {
        /** `POST /memory/search`: facts, raw history, scratchpad and errors, ranked together. */
        search: (body) => this.json("POST", "/memory/search", {
            json: typeof body === "string" ? { query: body } : body,
        }),
        /** Remove what matches a text from every store (`dry_run`: count only). */
        forget: (body) => this.json("POST", "/memory/forget", { json: body }),
        getSummary: () => this.json("GET", "/memory/summary"),
        putSummary: (content) => this.json("PUT", "/memory/summary", { json: { content } }),
        categories: (query = {}) => this.json("GET", "/memory/categories", { query: query }),
    };
    facts = {
        list: (query = {}) => this.json("GET", "/memory/facts", { query: query }),
        /** `POST /memory/facts`: save (or update) the fact `category`/`key`. */
        save: (fact) => this.json("POST", "/memory/facts", { json: fact }),
        search: (q, options = {}) => this.json("GET", "/memory/facts/search", { query: { q, limit: options.limit } }),
        delete: (key, options = {}) => this.json("DELETE", `/memory/facts/${seg(key)}`, { query: { category: options.category } }),
    };
    scratchpad = {
        list: (sessionId, query = {}) => this.json("GET", `/sessions/${seg(sessionId)}/scratchpad`, { query: query }),
        get: (sessionId, section) => this.json("GET", `/sessions/${seg(sessionId)}/scratchpad/${seg(section)}`),
        put: (sessionId, section, value) => this.json("PUT", `/sessions/${seg(sessionId)}/scratchpad/${seg(section)}`, {
            json: { value },
        }),
        delete: (sessionId, section) => this.json("DELETE", `/sessions/${seg(sessionId)}/scratchpad/${seg(section)}`),
    };
    /**
     * The built-in tools over HTTP (`POST /tools/<name>`), for a runtime that runs its own
     * loop: hand the answer's `text` to the model as the tool result. `sessionId` is the
     * current session (the `X-Navi-Session-Id` header).
     */
    tools = {
        /** Any tool by name, with the model's arguments verbatim. */
        call: (name, args = {}, options = {}) => this.json("POST", `/tools/${seg(name)}`, { json: args, headers: sessionHeader(options) }),
        memory: (args, options = {}) => this.json("POST", "/tools/memory", { json: args, headers: sessionHeader(options) }),
        memorySearch: (args, options = {}) => this.json("POST", "/tools/memory_search", { json: args, headers: sessionHeader(options) }),
        chatHistory: (args, options = {}) => this.json("POST", "/tools/chat_history", { json: args, headers: sessionHeader(options) }),
        writeError: (args, options = {}) => this.json("POST", "/tools/write_error", { json: args, headers: sessionHeader(options) }),
        errorHistory: (args, options = {}) => this.json("POST", "/tools/error_history", { json: args, headers: sessionHeader(options) }),
    };
    files = {
        list: (sessionId, query = {}) => this.json("GET", `/sessions/${seg(sessionId)}/files`, { query: query }),
        /** Multipart upload: each file a `Blob`/`File`, or `{ name, data }`. */
        upload: (sessionId, files) => {
            const form = new FormData();
            for (const f of files) {
                if (f instanceof Blob) {
                    form.append("files", f, f.name ?? "file");
                }
                else {
                    const blob = f.data instanceof Blob
                        ? f.data
                        : new Blob([f.data], f.type ? { type: f.type } : {});
                    form.append("files", blob, f.name);
                }
            }
            return this.json("POST", `/sessions/${seg(sessionId)}/files`, { body: form });
        },
        /** The file's bytes, as a `Response` (`.arrayBuffer()`, `.blob()` or `.body`). */
        download: (sessionId, filename) => this.request("GET", `/sessions/${seg(sessionId)}/files/${seg(filename)}`, {
            headers: { Accept: "*/*" },
        }),
        /** Copy a file of the service's host into the session (`SHARE_FILE_ROOTS`). */
        shareFile: (sessionId, path) => this.json("POST", `/sessions/${seg(sessionId)}/share_file`, { json: { path } }),
        /** The publish card of a file already in the session. */
        publish: (sessionId, filename) => this.json("POST", `/sessions/${seg(sessionId)}/publish`, { json: { filename } }),
    };
    planning = {
        list: (sessionId, query = {}) => this.json("GET", `/sessions/${seg(sessionId)}/planning`, { query: query }),
        add: (sessionId, entry) => this.json("POST", `/sessions/${seg(sessionId)}/planning`, { json: { entry } }),
    };
    /** A shared session, read with its share token (no bearer token needed). */
    shared = {
        get: (token, query = {}) => this.json("GET", `/shared/${seg(token)}`, { query: query }),
        messages: (token, options = {}) => this.json("GET", `/shared/${seg(token)}/messages`, {
            query: { before_seq: options.beforeSeq, limit: options.limit },
        }),
    };
    /** The caller: `GET /me`. */
    me() {
        return this.json("GET", "/me");
    }
    /** `GET /health`: answered (not thrown) when degraded (503) too. */
    health() {
        return this.json("GET", "/health", { okStatuses: [503] });
    }
    /** The caller's own API tokens. */
    tokens = {
        list: (query = {}) => this.json("GET", "/me/tokens", { query: query }),
        /** A new token; its secret is in the answer only. */
        create: (name = "") => this.json("POST", "/me/tokens", { json: { name } }),
        revoke: (tokenId) => this.json("DELETE", `/me/tokens/${seg(tokenId)}`),
    };
    /** The caller's account as NDJSON: export and import (docs/operations.md). */
    account = {
        /** `GET /me/export`: the `Response`, its body the NDJSON stream (pipe it to a file). */
        export: () => this.request("GET", "/me/export", { headers: { Accept: "application/x-ndjson" } }),
        /** `GET /me/export` record by record. */
        exportRecords: () => ndjsonRecords(() => this.account.export()),
        /** `POST /me/import` of an export (text, bytes, a Blob or a stream). */
        import: (data) => this.json("POST", "/me/import", {
            body: data,
            headers: { "Content-Type": "application/x-ndjson" },
        }),
    };
    /** Admin only: users, their tokens, forget and export for a user, all users' facts. */
    admin = {
        users: {
            list: (query = {}) => this.json("GET", "/admin/users", { query: query }),
            create: (body) => this.json("POST", "/admin/users", { json: body }),
            delete: (userId) => this.json("DELETE", `/admin/users/${seg(userId)}`),
            issueToken: (userId, name = "") => this.json("POST", `/admin/users/${seg(userId)}/tokens`, { json: { name } }),
            forget: (userId, body) => this.json("POST", `/admin/users/${seg(userId)}/forget`, { json: body }),
            export: (userId) => this.request("GET", `/admin/users/${seg(userId)}/export`, {
                headers: { Accept: "application/x-ndjson" },
            }),
        },
        memory: {
            list: (query = {}) => this.json("GET", "/admin/memory", { query: query }),
            search: (query) => this.json("GET", "/admin/memory/search", { query: query }),
            patch: (factId, patch) => this.json("PATCH", `/admin/memory/${seg(factId)}`, { json: patch }),
        },
    };
}
// ---------------------------------------------------------------------- turn stream
/**
 * The events of one streamed turn. Iterate it once (`for await`); afterwards `done` or
 * `error` holds the event that ended it, `content` / `thinking` the joined deltas.
 */
export class TurnStream {
    open;
    /** The `done` event, once seen: `status`, `content`, `pending`, … */
    done;
    /** The `error` event, once seen (nothing follows it). */
    error;
    /** The reply so far (the `token` texts joined). */
    content = "";
    /** The reasoning so far (the `thinking` texts joined). */
    thinking = "";
    started = false;
    closed = false;
    controller = new AbortController();
    constructor(open, signal) {
        this.open = open;
        if (signal) {
            if (signal.aborted)
                this.controller.abort(signal.reason);
            else
                signal.addEventListener("abort", () => this.controller.abort(signal.reason), { once: true });
        }
    }
    /** The turn stopped for the client's tools: run `done.pending`, then resume. */
    get requiresAction() {
        return this.done?.status === "requires_action";
    }
    /** The client's tool calls to run (`done.pending`). */
    get pending() {
        return (this.done?.pending ?? []);
    }
    /** Stop: closes the connection (the service interrupts the turn); the loop just ends. */
    close() {
        this.closed = true;
        this.controller.abort();
    }
    /** Read the stream to its end; the event that ended it (`done` or `error`). */
    async final() {
        for await (const _ of this) {
            // each event is recorded by the iterator
        }
        return (this.done ?? this.error);
    }
    async *[Symbol.asyncIterator]() {
        if (this.started)
            throw new Error("TurnStream: a turn's events can be read once");
        this.started = true;
        try {
            yield* this.events();
        }
        catch (e) {
            if (!this.closed)
                throw e; // close() ends the loop quietly
        }
    }
    async *events() {
        const response = await this.open(this.controller.signal);
        const type = response.headers.get("content-type") ?? "";
        if (!type.includes("text/event-stream")) {
            // a proxy or an old service answered JSON: its events are in the answer
            const out = (await response.json());
            for (const ev of out.events)
                yield this.record(ev);
            return;
        }
        if (!response.body)
            throw new NaviError(response.status, "empty_stream", "the answer has no body");
        for await (const msg of readSse(response.body)) {
            if (msg.event === "message" && msg.data === "")
                continue;
            let data;
            try {
                data = JSON.parse(msg.data);
            }
            catch {
                throw new NaviError(response.status, "bad_event", `event ${msg.event}: data is not JSON`, msg.data);
            }
            if (typeof data.event !== "string")
                data.event = msg.event;
            const ev = this.record(data);
            yield ev;
            if (ev.event === "done" || ev.event === "error")
                return;
        }
        throw new NaviError(response.status, "incomplete_stream", "the event stream ended before its done or error event");
    }
    record(ev) {
        switch (ev.event) {
            case "token":
                this.content += ev.text;
                break;
            case "thinking":
                this.thinking += ev.text;
                break;
            case "done":
                this.done = ev;
                this.content = ev.content;
                break;
            case "error":
                this.error = ev;
                break;
        }
        return ev;
    }
}
// -------------------------------------------------------------------------- helpers
function turnBody(request) {
    return typeof request === "string" ? { message: { content: request } } : request;
}
function sessionHeader(options) {
    return options.sessionId ? { [SESSION_HEADER]: options.sessionId } : {};
}
function queryString(query) {
    if (!query)
        return "";
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
        for (const v of Array.isArray(value) ? value : [value]) {
            if (v !== undefined && v !== null)
                params.append(key, String(v));
        }
    }
    const s = params.toString();
    return s ? `?${s}` : "";
}
async function* ndjsonRecords(open) {
    const response = await open();
    if (!response.body)
        return;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let finished = false;
    try {
        for (;;) {
            const { done, value } = await reader.read();
            buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
            let nl;
            while ((nl = buffer.indexOf("\n")) !== -1) {
                const line = buffer.slice(0, nl).trim();
                buffer = buffer.slice(nl + 1);
                if (line)
                    yield JSON.parse(line);
            }
            if (done) {
                finished = true;
                if (buffer.trim())
                    yield JSON.parse(buffer);
                return;
            }
        }
    }
    finally {
        if (!finished)
            await reader.cancel().catch(() => undefined);
        reader.releaseLock();
    }
}
export default Navi;
