/**
 * Server-Sent Events, as the WHATWG "event stream" grammar reads them: lines end in
 * CRLF, LF or CR; `field: value` (one optional space after the colon); `data` lines
 * joined with "\n"; a blank line dispatches; lines starting with ":" are comments.
 * Chunks may split a line, a CRLF pair or a UTF-8 sequence anywhere.
 */
/** One dispatched event: its name (`message` when the stream named none) and data. */
export interface SseMessage {
    event: string;
    data: string;
    id?: string;
}
/** Incremental parser: feed decoded text, get the events completed so far. */
export declare class SseParser {
    private buffer;
    private event;
    private data;
    private id;
    private sawCR;
    /** Text of the stream, in order; returns the events it completed. */
    push(text: string): SseMessage[];
    /** The stream ended: an event not closed by a blank line is dropped (as browsers do). */
    end(): SseMessage[];
    private line;
}
/** The events of a byte stream (a fetch `Response.body`), decoded as UTF-8. */
export declare function readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage, void, undefined>;
