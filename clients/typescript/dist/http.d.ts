/** The error type, `Retry-After` and WAL positions (`Navi-Write-LSN`). */
/** Any non-2xx answer of the service: its status and the `{error, detail}` body. */
export declare class NaviError extends Error {
    readonly name = "NaviError";
    /** HTTP status (0 when no answer came, e.g. a stream cut before its end). */
    readonly status: number;
    /** The kind, e.g. `not_found`, `unprocessable`, `unavailable`, `llm_unavailable`. */
    readonly error: string;
    /** What is wrong, in words. */
    readonly detail: string;
    /** The whole decoded body (extra fields such as `tokens`/`limit` of `context_too_large`). */
    readonly body: unknown;
    /** The answer's headers, when there was an answer. */
    readonly headers: Headers | undefined;
    constructor(status: number, error: string, detail: string, body?: unknown, headers?: Headers);
    /** Seconds the service asked to wait (`Retry-After`), if it did. */
    get retryAfter(): number | undefined;
    /** The service's request id (`X-Request-ID`), to find the request in its log. */
    get requestId(): string | undefined;
    /** The error a non-2xx response stands for; reads (and so consumes) its body. */
    static fromResponse(response: Response): Promise<NaviError>;
}
/**
 * `Retry-After` in seconds: delta-seconds, or an HTTP date (seconds from `now`, at least
 * 0); undefined when absent or unreadable.
 */
export declare function parseRetryAfter(value: string | null, now?: number): number | undefined;
/** A WAL position `X/Y` (two hex numbers) as one comparable number; undefined if malformed. */
export declare function parseLsn(value: string | null | undefined): bigint | undefined;
/**
 * The newest `Navi-Write-LSN` seen, echoed as `Navi-Min-LSN` so that reads after a write
 * see it on any worker or replica (docs/scaling.md, "Read replicas").
 */
export declare class LsnTracker {
    private value;
    private position;
    constructor(initial?: string);
    /** The position to send, `X/Y` as the service wrote it; undefined before any write. */
    get current(): string | undefined;
    /** Remember `header` when it is past the newest seen; true when it was. */
    observe(header: string | null | undefined): boolean;
}
