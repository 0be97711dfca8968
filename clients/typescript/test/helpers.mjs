// A fake fetch for the unit tests: answers from a script, records every call.

/** `script(call, index)` returns a Response (or throws); calls are recorded in `.calls`. */
export function fakeFetch(script) {
  const calls = [];
  const fn = async (url, init = {}) => {
    const headers = new Headers(init.headers);
    const call = { url: String(url), method: init.method ?? "GET", headers, body: init.body, init };
    calls.push(call);
    return script(call, calls.length - 1);
  };
  fn.calls = calls;
  return fn;
}

/** A fetch answering the given responses in order (the last one repeated). */
export function answers(...responses) {
  return fakeFetch((_call, i) => {
    const r = responses[Math.min(i, responses.length - 1)];
    return typeof r === "function" ? r() : r.clone();
  });
}

export function json(body, status = 200, headers = {}) {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json", ...headers },
  });
}

/** A byte stream delivering `chunks` (strings or Uint8Arrays) one read at a time. */
export function chunked(chunks, { onCancel } = {}) {
  const enc = new TextEncoder();
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i >= chunks.length) return controller.close();
      const c = chunks[i++];
      controller.enqueue(typeof c === "string" ? enc.encode(c) : c);
    },
    cancel(reason) {
      onCancel?.(reason);
    },
  });
}

export function sse(chunks, options, status = 200) {
  return new Response(chunked(chunks, options), {
    status,
    headers: { "Content-Type": "text/event-stream" },
  });
}

/** `bytes` cut in two at every position, then in three at every pair of `stride` steps. */
export function* splits(bytes, stride = 37) {
  for (let i = 1; i < bytes.length; i++) yield [bytes.slice(0, i), bytes.slice(i)];
  for (let i = 1; i < bytes.length; i += stride) {
    for (let j = i + 1; j < bytes.length; j += stride) {
      yield [bytes.slice(0, i), bytes.slice(i, j), bytes.slice(j)];
    }
  }
}
