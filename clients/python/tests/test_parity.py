"""`Navi` and `AsyncNavi` are one surface: the same methods with the same parameters,
each the function of `_api.py` of the same name, sending the same requests."""

from __future__ import annotations

import inspect
from typing import Any

import httpx

from navi_client import AsyncNavi, Message, ModelUsage, Navi, NaviError, ToolOutput
from navi_client import _api as api

LIFECYCLE = {"close", "aclose", "base_url", "write_lsn"}


def endpoints(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") and name not in LIFECYCLE
    }


def test_same_methods_same_parameters() -> None:
    sync, async_ = endpoints(Navi), endpoints(AsyncNavi)
    assert sorted(sync) == sorted(async_)
    assert len(sync) > 50
    for name, method in sync.items():
        amethod = async_[name]
        assert inspect.iscoroutinefunction(amethod), name
        assert not inspect.iscoroutinefunction(method), name
        s, a = inspect.signature(method), inspect.signature(amethod)
        assert s.parameters == a.parameters, name
        assert s.return_annotation == a.return_annotation.replace("Async", ""), name
        # and both are the builder of that name, with its parameters
        builder = inspect.signature(getattr(api, name))
        assert list(s.parameters.values())[1:] == list(builder.parameters.values()), name


SAMPLES: dict[str, Any] = {
    "session_id": "8c4b1a52-1d43-4b7c-9a53-0d0b0f3c2e11",
    "user_id": "u_1",
    "token_id": "2b1f6a52-1d43-4b7c-9a53-0d0b0f3c2e11",
    "name": "a name",
    "profile_id": "default",
    "messages": [Message("user", "hi"), {"role": "assistant", "content": "hello"}],
    "usage": ModelUsage("m", 100),
    "message": "hi",
    "images": ["aGk="],
    "tools": [{"type": "function", "function": {"name": "x"}}],
    "tool_results": [ToolOutput("call_1", "ok")],
    "query": "what port?",
    "q": "port",
    "session_ids": ["a", "b"],
    "category": "prefs",
    "key": "editor/main",
    "value": "neovim",
    "content": "a summary",
    "text": "P1234567",
    "action": "list",
    "tool": "shell",
    "error": "denied",
    "fix": "chown",
    "section": "plan notes",
    "files": [("a.txt", b"hello", "text/plain")],
    "filename": "a b.txt",
    "local_path": "/tmp/x",
    "token": "tok/en",
    "data": b'{"type":"header"}\n',
    "entry": {"step": 1},
    "fact_id": 7,
    "version_id": 11,
    "merged_into": None,
    "arguments": {"query": "x"},
    "limit": 5,
    "offset": 10,
    "before_seq": 42,
    "dry_run": True,
    "mid_turn": True,
    "pinned": True,
    "k": 3,
    "scope": "raw",
}


def arguments(method: Any) -> tuple[list[Any], dict[str, Any]]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in list(inspect.signature(method).parameters.values())[1:]:
        if p.name not in SAMPLES:
            assert p.default is not inspect.Parameter.empty, p.name
            continue
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[p.name] = SAMPLES[p.name]
        else:
            args.append(SAMPLES[p.name])
    return args, kwargs


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, list[tuple[str, str]], bytes]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        content = request.read()
        boundary = request.headers.get("content-type", "").partition("boundary=")[2]
        if boundary:  # multipart boundaries are random: compare the rest
            content = content.replace(boundary.encode(), b"BOUNDARY")
        headers = sorted(
            (k, v.replace(boundary, "BOUNDARY") if boundary else v)
            for k, v in request.headers.items()
            if k not in ("content-length",)
        )
        self.seen.append((request.method, str(request.url), headers, content))
        return httpx.Response(418, json={"error": "teapot", "detail": "recorded"})


async def test_both_clients_send_the_same_requests() -> None:
    sync_rec, async_rec = Recorder(), Recorder()
    navi = Navi("http://navi.test/base", "t", transport=httpx.MockTransport(sync_rec))
    anavi = AsyncNavi("http://navi.test/base", "t", transport=httpx.MockTransport(async_rec))
    names = sorted(endpoints(Navi))
    for name in names:
        args, kwargs = arguments(getattr(Navi, name))
        try:
            getattr(navi, name)(*args, **kwargs)
        except NaviError as e:
            assert e.status == 418
        else:
            raise AssertionError(f"{name}: no request")
        try:
            await getattr(anavi, name)(*args, **kwargs)
        except NaviError as e:
            assert e.status == 418
        else:
            raise AssertionError(f"{name}: no request")
    navi.close()
    await anavi.aclose()
    assert len(sync_rec.seen) == len(names)
    for name, s, a in zip(names, sync_rec.seen, async_rec.seen, strict=True):
        assert s == a, name
    urls = {s[1] for s in sync_rec.seen}
    # path segments are percent-encoded, the base path kept
    assert "http://navi.test/base/memory/facts/editor%2Fmain?category=prefs" in urls
    assert "http://navi.test/base/shared/tok%2Fen?limit=5" in urls
    assert any(u.endswith("/scratchpad/plan%20notes") for u in urls)
