"""A fake Ollama HTTP server for tests.

Runs a stdlib ``ThreadingHTTPServer`` on ``127.0.0.1`` (ephemeral port by default) in a
background thread, so it works from both sync and async tests::

    with FakeOllama(dim=64) as fake:
        client = ollama.Client(host=fake.url)
        ...

It speaks the subset of Ollama's HTTP API that Navi uses:

* ``GET /`` / ``HEAD /``        -> ``Ollama is running``
* ``GET /api/version``          -> ``{"version": "0.0.0-fake"}``
* ``GET /api/tags``             -> the configured models
* ``POST /api/embed``           -> deterministic bag-of-words embeddings (see :func:`fake_embedding`)
* ``POST /api/chat``            -> scripted replies (``chat_replies``), non-streaming or NDJSON
* ``GET /_fake/stats``          -> what ``/api/embed`` embedded since the last reset (the
  benchmarks, from another process): ``embed_requests``, ``embed_texts``, ``embed_chars``,
  ``embed_tokens`` (words, as ``prompt_eval_count`` counts them), ``embed_wordpiece`` and
  ``embed_wordpiece_full`` (with ``wordpiece=True`` and the local model's tokenizer
  installed: the WordPiece tokens the local model reads, at most 256 a text, and before
  that cut; else null), ``last_embed_at`` (unix time the last embedding was answered)
* ``POST /_fake/stats/reset``   -> those counters back to zero (``reset()`` does it too)
* ``GET /_fake/counts``   -> the requests received so far, per path (``counts``)

One request per connection (HTTP/1.0), so that ``"refuse"`` below refuses the next call;
``keep_alive=True`` answers in HTTP/1.1 with keep-alive instead, as the real server
does (the benchmarks: a new TCP connection per embedding is not what Ollama costs).

Every request that reaches the server (but ``/_fake/…``) is recorded in ``requests`` (``(path, json_or_None)``),
its headers in ``request_headers`` (``(path, {lower-case name: value})``), and counted per
path in ``counts``.

Failure modes (``fail(mode, times=None)``), settable at runtime:

* ``"refuse"``    -- stop listening, so connections are refused; ``recover()`` restarts on the
  same port.  (``times`` is not supported: refused connections never reach the server.)
* ``"slow"``      -- sleep ``slow_seconds`` before answering normally.
* ``"http500"``   -- ``500 {"error": "..."}``.
* ``"malformed"`` -- ``200`` with a body that is not valid JSON.
* ``"http404"``   -- ``404 {"error": "model 'x' not found"}`` (like Ollama).
* ``"http400"``   -- ``400 {"error": "..."}``.
* ``"wrong_dim"`` -- embeddings of dimension ``wrong_dim`` (only affects ``/api/embed``).

With ``times=N`` the mode applies to the next N affected requests only, then the server
goes back to normal.  ``paths=`` restricts a mode to some paths (e.g. ``{"/api/chat"}``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.chat_script import ScriptedReply, write_stream

__all__ = [
    "DEFAULT_CHAT_REPLY",
    "FAILURE_MODES",
    "FakeOllama",
    "cosine",
    "fake_embedding",
]

FAILURE_MODES = frozenset(
    {"refuse", "slow", "http500", "malformed", "http404", "http400", "wrong_dim"}
)

DEFAULT_CHAT_REPLY = (
    "- The user and the assistant discussed the topic.\n- No decisions were recorded.\nKEYS: NONE"
)

ChatReply = str | ScriptedReply | Callable[[dict[str, Any]], str | ScriptedReply]

_WORD_RE = re.compile(r"\w+", re.UNICODE)
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.25


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=16).digest()
    index = int.from_bytes(digest[:8], "little") % dim
    sign = 1.0 if digest[8] & 1 else -1.0
    return index, sign


def fake_embedding(text: str, dim: int = 768) -> list[float]:
    """Deterministic, L2-normalised embedding; texts sharing words are closer.

    Lower-cased unicode word tokens are hashed (blake2b) into ``dim`` buckets with a +-1 sign,
    plus character trigrams of each word (padded with ``#``) at a lower weight.  Text without
    any word maps to a fixed unit vector (``e_0``).
    """
    if dim <= 0:
        raise ValueError("dim must be positive")
    vec = [0.0] * dim
    words = _WORD_RE.findall(text.lower())
    if not words:
        vec[0] = 1.0
        return vec
    for word in words:
        idx, sign = _bucket("w:" + word, dim)
        vec[idx] += sign * _WORD_WEIGHT
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            idx, sign = _bucket("t:" + padded[i : i + 3], dim)
            vec[idx] += sign * _TRIGRAM_WEIGHT
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:  # pathological cancellation
        vec[0] = 1.0
        return vec
    return [x / norm for x in vec]


def cosine(a: list[float], b: list[float]) -> float:
    """Cosine similarity of two vectors (test helper)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _count_tokens(text: str) -> int:
    return len(_WORD_RE.findall(text))


WordPieceCount = Callable[[list[str]], tuple[int, int]]


def _wordpiece_counter() -> WordPieceCount | None:
    """(tokens the local model reads, tokens before its cut) of texts: the WordPiece
    tokenizer of app/llm/local_embedder.py ([CLS] and [SEP] included), or None when it or
    the `tokenizers` package is not installed."""
    try:
        from tokenizers import Tokenizer

        from app.llm.local_embedder import MAX_TOKENS, _default_paths

        tokenizer = Tokenizer.from_file(str(_default_paths()[1]))
    except Exception:
        return None
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(texts: list[str]) -> tuple[int, int]:
        lengths = [len(e.ids) for e in tokenizer.encode_batch(texts)] if texts else []
        return sum(min(n, MAX_TOKENS) for n in lengths), sum(lengths)

    return count


def _zero_stats(wordpiece: bool) -> dict[str, Any]:
    none = 0 if wordpiece else None
    return {
        "embed_requests": 0,
        "embed_texts": 0,
        "embed_chars": 0,
        "embed_tokens": 0,
        "embed_wordpiece": none,
        "embed_wordpiece_full": none,
        "last_embed_at": None,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], fake: FakeOllama) -> None:
        self.fake = fake
        super().__init__(addr, _KeepAliveHandler if fake.keep_alive else _Handler)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, so a "refuse" really refuses the next request
    # instead of the client reusing a pooled keep-alive connection.
    protocol_version = "HTTP/1.0"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_HEAD(self) -> None:
        self.server.fake._handle(self, "HEAD")

    def do_GET(self) -> None:
        self.server.fake._handle(self, "GET")

    def do_POST(self) -> None:
        self.server.fake._handle(self, "POST")

    def do_DELETE(self) -> None:
        self.server.fake._handle(self, "DELETE")


class _KeepAliveHandler(_Handler):
    """HTTP/1.1 with keep-alive, as the real server (Go's net/http) answers: for the
    benchmarks, whose client would otherwise open a TCP connection per call. A stream
    (no length) still ends its connection."""

    protocol_version = "HTTP/1.1"


class FakeOllama:
    """Fake Ollama server; see the module docstring."""

    def __init__(
        self,
        *,
        dim: int = 768,
        models: Iterable[str] = ("fake-chat:latest", "fake-embed:latest"),
        strict_models: bool = False,
        slow_seconds: float = 2.0,
        wrong_dim: int | None = None,
        default_reply: ChatReply = DEFAULT_CHAT_REPLY,
        host: str = "127.0.0.1",
        port: int = 0,
        keep_alive: bool = False,
        wordpiece: bool = False,
    ) -> None:
        self.dim = dim
        self.keep_alive = keep_alive
        self.models = list(models)
        self.strict_models = strict_models
        self.slow_seconds = slow_seconds
        #: an /api/embed call of more than one text (an index batch, not a query) takes
        #: this long: a slow embedder for the indexers, a fast one for a search's query
        self.embed_batch_seconds = 0.0
        self.wrong_dim = wrong_dim if wrong_dim is not None else (dim + 1 if dim < 4 else dim // 2)
        self.default_reply = default_reply
        self.host = host
        self.port = port

        self.chat_replies: list[ChatReply] = []
        self.requests: list[tuple[str, Any]] = []
        self.request_headers: list[tuple[str, dict[str, str]]] = []
        self.counts: Counter[str] = Counter()
        #: per /api/chat call: (received, first byte sent, last byte sent), perf_counter
        self.chat_times: list[tuple[float, float, float]] = []
        #: WordPiece counts in the embedding stats (``wordpiece=True``, when installed)
        self._wordpiece = _wordpiece_counter() if wordpiece else None
        #: what /api/embed embedded since the last reset (``GET /_fake/stats``)
        self.embed_stats: dict[str, Any] = _zero_stats(self._wordpiece is not None)

        self._lock = threading.RLock()
        self._mode: str | None = None
        self._mode_remaining: int | None = None
        self._mode_paths: frozenset[str] | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._wakeup = threading.Event()
        #: bumped by `reset`: a request that began before (a slow call a test gave up on)
        #: answers with the default reply, never one the next test scripted
        self._generation = 0

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("FakeOllama has not been started")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> FakeOllama:
        with self._lock:
            if self._server is not None:
                return self
            server = self._bind()
            self.port = server.server_address[1]
            self._wakeup = threading.Event()
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.02},
                name=f"fake-ollama-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def _bind(self) -> _Server:
        # Re-binding the same port right after a stop can race with the kernel; retry briefly.
        last: OSError | None = None
        for _ in range(50):
            try:
                return _Server((self.host, self.port), self)
            except OSError as exc:
                last = exc
                if not self.port:
                    raise
                time.sleep(0.02)
        assert last is not None
        raise last

    def stop(self) -> None:
        with self._lock:
            server, thread = self._server, self._thread
            self._server = None
            self._thread = None
            self._wakeup.set()  # wake handlers sleeping in "slow" mode
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ failure modes
    @property
    def mode(self) -> str | None:
        return self._mode

    def fail(
        self, mode: str, times: int | None = None, *, paths: Iterable[str] | None = None
    ) -> None:
        """Switch to a failure mode, for the next ``times`` affected requests (or until
        :meth:`recover`)."""
        if mode not in FAILURE_MODES:
            raise ValueError(
                f"unknown failure mode {mode!r}; expected one of {sorted(FAILURE_MODES)}"
            )
        if times is not None and times < 1:
            raise ValueError("times must be >= 1")
        if mode == "refuse":
            if times is not None:
                raise ValueError("'refuse' cannot be limited to N requests; call recover()")
            with self._lock:
                self._mode, self._mode_remaining, self._mode_paths = "refuse", None, None
            self.stop()
            return
        with self._lock:
            self._mode = mode
            self._mode_remaining = times
            self._mode_paths = frozenset(paths) if paths is not None else None

    def recover(self) -> None:
        """Back to normal; restarts the server (same port) if it was stopped."""
        with self._lock:
            self._mode, self._mode_remaining, self._mode_paths = None, None, None
        if self._server is None and self.port:
            self.start()

    def reset(self) -> None:
        """Forget recorded requests, counters and scripted replies; clear failure modes."""
        with self._lock:
            self.requests.clear()
            self.request_headers.clear()
            self.counts.clear()
            self.chat_replies.clear()
            self.chat_times.clear()
            self.embed_batch_seconds = 0.0
            self._generation += 1
        self.reset_stats()
        self.recover()

    def reset_stats(self) -> None:
        """The embedding stats (``GET /_fake/stats``) back to zero."""
        with self._lock:
            self.embed_stats = _zero_stats(self._wordpiece is not None)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.embed_stats)

    def count(self, path: str) -> int:
        with self._lock:
            return self.counts[path]

    def requests_for(self, path: str) -> list[Any]:
        with self._lock:
            return [body for p, body in self.requests if p == path]

    def _take_mode(self, path: str) -> str | None:
        """The failure mode applying to this request (consuming one of ``times``)."""
        with self._lock:
            mode = self._mode
            if mode is None or mode == "refuse":
                return None
            if self._mode_paths is not None and path not in self._mode_paths:
                return None
            if mode == "wrong_dim" and path != "/api/embed":
                return None
            if self._mode_remaining is not None:
                self._mode_remaining -= 1
                if self._mode_remaining <= 0:
                    self._mode, self._mode_remaining, self._mode_paths = None, None, None
            return mode

    # ------------------------------------------------------------------ request handling
    def _handle(self, h: _Handler, method: str) -> None:
        h.generation = self._generation  # type: ignore[attr-defined]
        path = h.path.split("?", 1)[0]
        body: Any = None
        raw = b""
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            raw = h.rfile.read(length)
        bad_json = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                bad_json = True
        if path.startswith("/_fake/"):  # the harness's, not a client's: never recorded
            try:
                return self._fake_route(h, method, path)
            except (BrokenPipeError, ConnectionResetError):
                return None
        with self._lock:
            self.requests.append((path, body))
            self.request_headers.append((path, {k.lower(): v for k, v in h.headers.items()}))
            self.counts[path] += 1
            wakeup = self._wakeup

        mode = self._take_mode(path)
        try:
            if mode == "slow":
                if wakeup.wait(self.slow_seconds):
                    return  # server stopping: drop the connection
            elif mode == "http500":
                return self._send_json(h, 500, {"error": "fake ollama: internal server error"})
            elif mode == "http400":
                return self._send_json(h, 400, {"error": "fake ollama: invalid request"})
            elif mode == "http404":
                model = body.get("model") if isinstance(body, dict) else None
                return self._send_json(h, 404, {"error": f"model '{model or 'unknown'}' not found"})
            elif mode == "malformed":
                return self._send_raw(
                    h, 200, b'{"model": "fake", "embeddings": [[0.1, 0.2', "application/json"
                )

            if bad_json:
                return self._send_json(h, 400, {"error": "invalid JSON body"})
            self._route(h, method, path, body, wrong_dim=mode == "wrong_dim")
        except (BrokenPipeError, ConnectionResetError):
            pass  # client went away (e.g. timed out)

    def _route(self, h: _Handler, method: str, path: str, body: Any, *, wrong_dim: bool) -> None:
        if path == "/" and method in ("GET", "HEAD"):
            return self._send_raw(h, 200, b"Ollama is running", "text/plain; charset=utf-8")
        if path == "/api/version" and method == "GET":
            return self._send_json(h, 200, {"version": "0.0.0-fake"})
        if path == "/api/tags" and method == "GET":
            return self._send_json(h, 200, {"models": [self._model_info(m) for m in self.models]})
        if path == "/api/ps" and method == "GET":
            return self._send_json(h, 200, {"models": []})
        if path == "/api/embed" and method == "POST":
            return self._embed(h, body if isinstance(body, dict) else {}, wrong_dim=wrong_dim)
        if path == "/api/chat" and method == "POST":
            return self._chat(h, body if isinstance(body, dict) else {})
        return self._send_raw(h, 404, b"404 page not found", "text/plain")

    def _fake_route(self, h: _Handler, method: str, path: str) -> None:
        if path == "/_fake/stats" and method == "GET":
            return self._send_json(h, 200, self.stats())
        if path == "/_fake/counts" and method == "GET":  # requests per path (a bench's probe)
            with self._lock:
                return self._send_json(h, 200, dict(self.counts))
        if path == "/_fake/stats/reset" and method == "POST":
            self.reset_stats()
            return self._send_json(h, 200, self.stats())
        return self._send_raw(h, 404, b"404 page not found", "text/plain")

    def _count_embedded(self, texts: list[str]) -> None:
        wordpiece = self._wordpiece(texts) if self._wordpiece is not None else None
        with self._lock:
            stats = self.embed_stats
            stats["embed_requests"] += 1
            stats["embed_texts"] += len(texts)
            stats["embed_chars"] += sum(len(t) for t in texts)
            stats["embed_tokens"] += sum(_count_tokens(t) for t in texts)
            if wordpiece is not None:
                stats["embed_wordpiece"] += wordpiece[0]
                stats["embed_wordpiece_full"] += wordpiece[1]
            stats["last_embed_at"] = time.time()

    def _model_info(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "model": name,
            "modified_at": "2024-01-01T00:00:00Z",
            "size": 1000,
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": {"format": "gguf", "family": "fake", "parameter_size": "1B"},
        }

    def _known_model(self, model: str) -> bool:
        if not self.strict_models:
            return True
        names = set(self.models) | {m.removesuffix(":latest") for m in self.models}
        return model in names

    def _embed(self, h: _Handler, body: dict[str, Any], *, wrong_dim: bool) -> None:
        model = str(body.get("model") or "")
        if not model:
            return self._send_json(h, 400, {"error": "model is required"})
        if not self._known_model(model):
            return self._send_json(h, 404, {"error": f"model '{model}' not found"})
        inp = body.get("input", [])
        texts = [inp] if isinstance(inp, str) else list(inp or [])
        if not all(isinstance(t, str) for t in texts):
            return self._send_json(h, 400, {"error": "invalid input type"})
        if len(texts) > 1 and self.embed_batch_seconds:
            self._wakeup.wait(self.embed_batch_seconds)
        dim = self.wrong_dim if wrong_dim else self.dim
        embeddings = [fake_embedding(t, dim) for t in texts]
        wanted = body.get("dimensions")
        if isinstance(wanted, int) and 0 < wanted < dim and not wrong_dim:
            embeddings = [_renorm(v[:wanted]) for v in embeddings]
        self._count_embedded(texts)
        self._send_json(
            h,
            200,
            {
                "model": model,
                "embeddings": embeddings,
                "total_duration": 1_000_000,
                "load_duration": 100_000,
                "prompt_eval_count": sum(_count_tokens(t) for t in texts),
            },
        )

    def _next_reply(self, body: dict[str, Any]) -> ScriptedReply:
        with self._lock:
            reply = self.chat_replies.pop(0) if self.chat_replies else self.default_reply
        return self._as_reply(reply, body)

    def _as_reply(self, reply: ChatReply, body: dict[str, Any]) -> ScriptedReply:
        if callable(reply):  # a reply chosen per call (a script of tool rounds)
            reply = reply(body)
        return reply if isinstance(reply, ScriptedReply) else ScriptedReply(reply)

    def _chat(self, h: _Handler, body: dict[str, Any]) -> None:
        started = time.perf_counter()
        first = self._chat_reply(h, body)
        with self._lock:
            self.chat_times.append((started, first or time.perf_counter(), time.perf_counter()))

    def _chat_reply(self, h: _Handler, body: dict[str, Any]) -> float | None:
        """Answer a chat call; when it streamed, the time its first byte went out."""
        model = str(body.get("model") or "")
        if not model:
            return self._send_json(h, 400, {"error": "model is required"})
        if not self._known_model(model):
            return self._send_json(h, 404, {"error": f"model '{model}' not found"})
        messages = body.get("messages") or []
        prompt_tokens = sum(
            _count_tokens(str(m.get("content") or "")) for m in messages if isinstance(m, dict)
        )
        if getattr(h, "generation", self._generation) != self._generation:
            reply = self._as_reply(self.default_reply, body)  # began before a reset()
        else:
            reply = self._next_reply(body)
        if reply.status is not None:
            return self._send_json(h, reply.status, {"error": f"fake ollama: HTTP {reply.status}"})
        content = reply.content
        final: dict[str, Any] = {
            "model": model,
            "created_at": _now(),
            "message": reply.message(),
            "done": True,
            "done_reason": "stop",
            "total_duration": 2_000_000,
            "load_duration": 100_000,
            "prompt_eval_count": (
                prompt_tokens if reply.prompt_eval_count is None else reply.prompt_eval_count
            ),
            "prompt_eval_duration": 500_000,
            "eval_count": _count_tokens(content),
            "eval_duration": 1_000_000,
        }
        if body.get("think") is True and not reply.thinking:
            final["message"]["thinking"] = "fake reasoning"
        if body.get("stream", True) is False:
            return self._send_json(h, 200, final)

        # Streaming: NDJSON chunks (word-ish pieces), then a final "done" chunk.
        h.send_response(200)
        h.send_header("Content-Type", "application/x-ndjson")
        if self.keep_alive:  # no length: the end of the connection ends the stream
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        first = time.perf_counter()
        if not write_stream(h.wfile, reply, model, _now(), final):
            h.close_connection = True  # the script broke the stream: drop it
        return first

    # ------------------------------------------------------------------ low-level
    @staticmethod
    def _send_json(h: _Handler, status: int, payload: Any) -> None:
        FakeOllama._send_raw(
            h, status, json.dumps(payload).encode("utf-8"), "application/json; charset=utf-8"
        )

    @staticmethod
    def _send_raw(h: _Handler, status: int, data: bytes, content_type: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
        h.wfile.flush()


def _renorm(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        out = [0.0] * len(vec)
        out[0] = 1.0
        return out
    return [x / norm for x in vec]
