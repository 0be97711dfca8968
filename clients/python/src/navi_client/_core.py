"""The part of the client that does not do I/O, shared by `Navi` and `AsyncNavi`:

* `Call` — one request as data (method, path, query, body, how to decode the answer);
  every endpoint is built once, in `_api.py`, and both clients only send what it built;
* `Core` — turns a `Call` into an `httpx.Request` (base URL, token, `Navi-Min-LSN`),
  reads the answer's `Navi-Write-LSN`, decides whether a 503 is retried and for how long,
  and maps an error answer to its exception.

So the sync and the async client cannot drift: they differ only in how they wait.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from navi_client._errors import NaviError, error_for, parse_retry_after

__all__ = [
    "DEFAULT_TIMEOUT",
    "Call",
    "Core",
    "LsnTracker",
    "RetryPolicy",
    "json_as",
    "no_content",
    "parse_lsn",
    "path",
    "settings_from_env",
]

T = TypeVar("T")

VERSION = "0.1.0"
WRITE_LSN_HEADER = "Navi-Write-LSN"
MIN_LSN_HEADER = "Navi-Min-LSN"
SESSION_HEADER = "X-Navi-Session-Id"
_LSN = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")

Param = str | int | float | bool
Body = bytes | Iterable[bytes] | None


#: Connect in 10 s; a turn answered in one piece may think for minutes.
DEFAULT_TIMEOUT = httpx.Timeout(300.0, connect=10.0)


def settings_from_env(base_url: str | None, token: str | None) -> tuple[str, str | None]:
    """`base_url` and `token`, else `NAVI_URL` and `NAVI_TOKEN` from the environment."""
    url = base_url or os.environ.get("NAVI_URL")
    if not url:
        raise ValueError("no base URL: pass base_url or set NAVI_URL")
    return url, token if token is not None else os.environ.get("NAVI_TOKEN")


class _NoJson:
    """The absence of a JSON body (None is the JSON `null`)."""

    def __repr__(self) -> str:
        return "NO_JSON"


NO_JSON: Any = _NoJson()


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request of the API and how its 2xx answer is decoded."""

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    params: Sequence[tuple[str, Param]] = ()
    json: Any = NO_JSON
    content: Body = None
    files: Sequence[tuple[str, Any]] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: an answer to read as it arrives (the turn's events, an export)
    stream: bool = False
    #: the body can be sent again (a 503 is retried only then)
    replayable: bool = True


def path(template: str, *segments: object) -> str:
    """A path with its segments percent-encoded (`/` too): `path("/a/{}", "x/y")`."""
    return template.format(*(quote(str(s), safe="") for s in segments))


def query(**params: Any) -> list[tuple[str, Param]]:
    """Query parameters: None left out, lists repeated, booleans as `true` / `false`."""
    out: list[tuple[str, Param]] = []
    for name, value in params.items():
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            out.append((name, ("true" if v else "false") if isinstance(v, bool) else v))
    return out


def body(**fields: Any) -> dict[str, Any]:
    """A JSON body without the fields left at None (the service's defaults apply)."""
    return {k: v for k, v in fields.items() if v is not None and v is not msgspec.UNSET}


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def json_as(tp: type[T]) -> Callable[[httpx.Response], T]:
    """Decode the answer's JSON as `tp` (unknown fields ignored)."""
    decoder = _DECODERS.get(tp)
    if decoder is None:
        decoder = _DECODERS[tp] = msgspec.json.Decoder(tp)

    def decode(response: httpx.Response) -> T:
        return decoder.decode(response.content)  # type: ignore[no-any-return]

    return decode


def no_content(response: httpx.Response) -> None:
    return None


def raw_response(response: httpx.Response) -> httpx.Response:
    return response


def content_bytes(response: httpx.Response) -> bytes:
    return response.content


def parse_lsn(value: str | None) -> int | None:
    """PostgreSQL's `X/Y` text form of a WAL position as one number (None when it is
    not two hex numbers of at most 8 digits each)."""
    if value is None:
        return None
    m = _LSN.fullmatch(value.strip())
    if m is None:
        return None
    return (int(m.group(1), 16) << 32) | int(m.group(2), 16)


class LsnTracker:
    """The newest `Navi-Write-LSN` a client has been answered with (read-your-writes
    with read replicas, docs/scaling.md): later requests carry it as `Navi-Min-LSN`.
    Only a newer position replaces the one kept; thread-safe."""

    def __init__(self, initial: str | None = None) -> None:
        self._lock = threading.Lock()
        self._value: int | None = None
        self._text: str | None = None
        if initial is not None:
            self.observe(initial)

    @property
    def current(self) -> str | None:
        """The position to echo (as the service wrote it), None before any write."""
        return self._text

    def observe(self, header: str | None) -> bool:
        """Remember `header` if it is a position newer than the one kept."""
        value = parse_lsn(header)
        if value is None or header is None:
            return False
        with self._lock:
            if self._value is not None and value <= self._value:
                return False
            self._value, self._text = value, header.strip()
            return True


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When a 503 is tried again: only an answer with `Retry-After` (the database is
    unavailable for a moment; the service sets it exactly then), only a body that can
    be sent again, after the time it asks for, at most `max_attempts` requests in all
    and at most `max_wait` seconds of waiting in all (a `Retry-After` that would pass
    it ends the retries at once). `max_attempts=1` switches retries off."""

    max_attempts: int = 3
    max_wait: float = 30.0

    def delay(
        self, call: Call[Any], response: httpx.Response, attempt: int, waited: float
    ) -> float | None:
        """Seconds to wait before sending `call` again, or None to give up."""
        if response.status_code != 503 or not call.replayable:
            return None
        if attempt >= self.max_attempts:
            return None
        after = parse_retry_after(response.headers.get("retry-after"))
        if after is None or waited + after > self.max_wait:
            return None
        return after


class Core:
    """Request building and answer handling, without I/O (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        lsn: LsnTracker | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.headers = {
            "User-Agent": f"navi-client-python/{VERSION}",
            "Accept": "application/json",
            **(headers or {}),
        }
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.retry = retry or RetryPolicy()
        self.lsn = lsn or LsnTracker()

    def request_args(self, call: Call[Any]) -> dict[str, Any]:
        """The arguments of `httpx.Client.build_request` (the same for the async one)."""
        headers = dict(self.headers)
        if self.lsn.current is not None:
            headers[MIN_LSN_HEADER] = self.lsn.current
        headers.update(call.headers)
        args: dict[str, Any] = {
            "method": call.method,
            "url": self.base_url + call.path,
            "params": list(call.params) or None,
            "headers": headers,
        }
        if call.json is not NO_JSON:
            args["content"] = msgspec.json.encode(call.json)
            headers["Content-Type"] = "application/json"
        elif call.content is not None:
            args["content"] = call.content
        if call.files is not None:
            args["files"] = list(call.files)
        return args

    def observe(self, response: httpx.Response) -> None:
        """What every answer tells the client: its write position."""
        self.lsn.observe(response.headers.get(WRITE_LSN_HEADER))

    def retry_delay(
        self, call: Call[Any], response: httpx.Response, attempt: int, waited: float
    ) -> float | None:
        return self.retry.delay(call, response, attempt, waited)

    @staticmethod
    def error(response: httpx.Response) -> NaviError:
        """The exception of a non-2xx answer (its body already read)."""
        return error_for(response.status_code, response.content, response.headers)
