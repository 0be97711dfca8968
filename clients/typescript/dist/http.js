/** The error type, `Retry-After` and WAL positions (`Navi-Write-LSN`). */
/** Any non-2xx answer of the service: its status and the `{error, detail}` body. */
export class NaviError extends Error {
    name = "NaviError";
    /** HTTP status (0 when no answer came, e.g. a stream cut before its end). */
    status;
    /** The kind, e.g. `not_found`, `unprocessable`, `unavailable`, `llm_unavailable`. */
    error;
    /** What is wrong, in words. */
    detail;
    /** The whole decoded body (extra fields such as `tokens`/`limit` of `context_too_large`). */
    body;
    /** The answer's headers, when there was an answer. */
    headers;
    constructor(status, error, detail, body, headers) {
        super(`${status} ${error}: ${detail}`);
        this.status = status;
        this.error = error;
        this.detail = detail;
        this.body = body;
        this.headers = headers;
    }
    /** Seconds the service asked to wait (`Retry-After`), if it did. */
    get retryAfter() {
        return parseRetryAfter(this.headers?.get("retry-after") ?? null);
    }
    /** The service's request id (`X-Request-ID`), to find the request in its log. */
    get requestId() {
        return this.headers?.get("x-request-id") ?? undefined;
    }
    /** The error a non-2xx response stands for; reads (and so consumes) its body. */
    static async fromResponse(response) {
        let text = "";
        try {
            text = await response.text();
        }
        catch {
            // the body could not be read: the status alone speaks
        }
        let body = text;
        try {
            body = text ? JSON.parse(text) : undefined;
        }
        catch {
            // not JSON (a proxy's HTML page, say): keep the text
        }
        let error = `http_${response.status}`;
        let detail = text.slice(0, 500) || response.statusText || "no detail";
        if (body !== null && typeof body === "object") {
            const o = body;
            if (typeof o.error === "string")
                error = o.error;
            if (typeof o.detail === "string")
                detail = o.detail;
            else if (o.detail !== undefined)
                detail = JSON.stringify(o.detail);
        }
        return new NaviError(response.status, error, detail, body, response.headers);
    }
}
/**
 * `Retry-After` in seconds: delta-seconds, or an HTTP date (seconds from `now`, at least
 * 0); undefined when absent or unreadable.
 */
export function parseRetryAfter(value, now = Date.now()) {
    if (value === null)
        return undefined;
    const v = value.trim();
    if (/^\d+(\.\d+)?$/.test(v))
        return Number(v);
    const at = Date.parse(v);
    if (Number.isNaN(at))
        return undefined;
    return Math.max(0, (at - now) / 1000);
}
/** A WAL position `X/Y` (two hex numbers) as one comparable number; undefined if malformed. */
export function parseLsn(value) {
    if (!value)
        return undefined;
    const m = /^\s*([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})\s*$/.exec(value);
    if (!m)
        return undefined;
    return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}
/**
 * The newest `Navi-Write-LSN` seen, echoed as `Navi-Min-LSN` so that reads after a write
 * see it on any worker or replica (docs/scaling.md, "Read replicas").
 */
export class LsnTracker {
    value;
    position;
    constructor(initial) {
        if (initial !== undefined)
            this.observe(initial);
    }
    /** The position to send, `X/Y` as the service wrote it; undefined before any write. */
    get current() {
        return this.value;
    }
    /** Remember `header` when it is past the newest seen; true when it was. */
    observe(header) {
        const position = parseLsn(header);
        if (position === undefined || header == null)
            return false;
        if (this.position !== undefined && position <= this.position)
            return false;
        this.position = position;
        this.value = header.trim();
        return true;
    }
}
