/**
 * Server-Sent Events, as the WHATWG "event stream" grammar reads them: lines end in
 * CRLF, LF or CR; `field: value` (one optional space after the colon); `data` lines
 * joined with "\n"; a blank line dispatches; lines starting with ":" are comments.
 * Chunks may split a line, a CRLF pair or a UTF-8 sequence anywhere.
 */
/** Incremental parser: feed decoded text, get the events completed so far. */
export class SseParser {
    buffer = "";
    event = "";
    data = [];
    id;
    sawCR = false;
    /** Text of the stream, in order; returns the events it completed. */
    push(text) {
        const out = [];
        if (text === "")
            return out; // keep a pending CR for the next chunk
        let start = 0;
        if (this.sawCR && text.startsWith("\n"))
            start = 1; // the LF of a CRLF split by the chunk
        this.sawCR = false;
        for (let i = start; i < text.length; i++) {
            const c = text.charCodeAt(i);
            if (c !== 10 && c !== 13)
                continue;
            this.line(this.buffer + text.slice(start, i), out);
            this.buffer = "";
            if (c === 13) {
                if (i + 1 === text.length)
                    this.sawCR = true;
                else if (text.charCodeAt(i + 1) === 10)
                    i++;
            }
            start = i + 1;
        }
        this.buffer += text.slice(start);
        return out;
    }
    /** The stream ended: an event not closed by a blank line is dropped (as browsers do). */
    end() {
        this.buffer = "";
        this.event = "";
        this.data = [];
        return [];
    }
    line(line, out) {
        if (line === "") {
            if (this.data.length > 0) {
                const msg = { event: this.event || "message", data: this.data.join("\n") };
                if (this.id !== undefined)
                    msg.id = this.id;
                out.push(msg);
            }
            this.event = "";
            this.data = [];
            return;
        }
        if (line.startsWith(":"))
            return;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? "" : line.slice(colon + 1);
        if (value.startsWith(" "))
            value = value.slice(1);
        if (field === "event")
            this.event = value;
        else if (field === "data")
            this.data.push(value);
        else if (field === "id" && !value.includes("\0"))
            this.id = value;
        // `retry` and unknown fields: ignored
    }
}
/** The events of a byte stream (a fetch `Response.body`), decoded as UTF-8. */
export async function* readSse(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder("utf-8");
    const parser = new SseParser();
    let finished = false;
    try {
        for (;;) {
            const { done, value } = await reader.read();
            if (done) {
                finished = true;
                yield* parser.push(decoder.decode());
                yield* parser.end();
                return;
            }
            yield* parser.push(decoder.decode(value, { stream: true }));
        }
    }
    finally {
        // A consumer that stops early (break, return, throw) closes the connection: the
        // service then interrupts the turn and saves what the model produced so far.
        if (!finished)
            await reader.cancel().catch(() => undefined);
        reader.releaseLock();
    }
}
