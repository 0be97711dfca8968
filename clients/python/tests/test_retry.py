"""A 503 with `Retry-After` is sent again after that long, within the client's bounds
(units, with httpx.MockTransport; the sleeps are recorded, not slept)."""

from __future__ import annotations

import io

import httpx
import pytest

import navi_client._async
import navi_client._sync
from navi_client import AsyncNavi, Navi, Unavailable

UNAVAILABLE = {"error": "unavailable", "detail": "the database is unavailable; retry later"}
ME = {"id": "u", "name": "n", "is_admin": False, "permissions": [], "auth_enabled": True}


class Script:
    """Answers the scripted statuses in order (then 200), counting the requests."""

    def __init__(self, *answers: tuple[int, str | None]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        if not self.answers:
            return httpx.Response(200, json=ME)
        status, after = self.answers.pop(0)
        headers = {"Retry-After": after} if after is not None else {}
        return httpx.Response(status, json=UNAVAILABLE, headers=headers)


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(navi_client._sync, "_sleep", waits.append)
    monkeypatch.setattr(navi_client._async, "_sleep", asleep)
    return waits


def client(script: Script, **kw: object) -> Navi:
    return Navi("http://navi.test", "t", transport=httpx.MockTransport(script), **kw)  # type: ignore[arg-type]


def test_retried_after_retry_after(slept: list[float]) -> None:
    script = Script((503, "1"), (503, "2"))
    with client(script) as navi:
        assert navi.me().name == "n"
    assert len(script.requests) == 3 and slept == [1.0, 2.0]


def test_at_most_max_attempts(slept: list[float]) -> None:
    script = Script(*[(503, "1")] * 10)
    with client(script, retry_max_attempts=4) as navi, pytest.raises(Unavailable) as info:
        navi.me()
    assert len(script.requests) == 4 and slept == [1.0, 1.0, 1.0]
    assert info.value.error == "unavailable" and info.value.retry_after == 1.0


def test_at_most_max_wait_in_all(slept: list[float]) -> None:
    script = Script((503, "2"), (503, "2"), (503, "2"))
    with client(script, retry_max_attempts=10, retry_max_wait=5) as navi:
        with pytest.raises(Unavailable):
            navi.me()
    # 2 + 2 waited; a third 2 would pass 5 s: raised at once
    assert len(script.requests) == 3 and slept == [2.0, 2.0]

    script = Script((503, "60"))
    with client(script) as navi, pytest.raises(Unavailable):
        navi.me()
    assert len(script.requests) == 1 and slept == [2.0, 2.0]


def test_not_retried(slept: list[float]) -> None:
    # a 503 without Retry-After (the model: a turn's message is already stored)
    script = Script((503, None))
    with client(script) as navi, pytest.raises(Unavailable):
        navi.turn("s", "hi")
    assert len(script.requests) == 1
    # other statuses
    script = Script((500, "1"))
    with client(script) as navi, pytest.raises(Exception, match="500"):
        navi.me()
    assert len(script.requests) == 1
    # retries switched off
    script = Script((503, "1"))
    with client(script, retry_max_attempts=1) as navi, pytest.raises(Unavailable):
        navi.me()
    assert len(script.requests) == 1
    # a body that cannot be sent again (a file object is read as it goes)
    script = Script((503, "1"))
    with client(script) as navi, pytest.raises(Unavailable):
        navi.import_account(io.BytesIO(b'{"type":"header"}\n'))
    assert len(script.requests) == 1
    assert slept == []


def test_a_retried_request_is_the_same_request(slept: list[float]) -> None:
    script = Script((503, "0"))
    with client(script) as navi:
        navi.call_tool("memory", {"action": "save", "key": "editor"}, session_id="s")
    first, second = script.requests
    assert (first.method, first.url, first.content) == (second.method, second.url, second.content)
    assert first.headers["x-navi-session-id"] == second.headers["x-navi-session-id"] == "s"
    assert slept == [0.0]


async def test_async_retried_within_bounds(slept: list[float]) -> None:
    script = Script((503, "1"), (503, "1"))
    transport = httpx.MockTransport(script)
    async with AsyncNavi("http://navi.test", "t", transport=transport) as navi:
        assert (await navi.me()).name == "n"
    assert len(script.requests) == 3 and slept == [1.0, 1.0]

    script = Script(*[(503, "1")] * 5)
    transport = httpx.MockTransport(script)
    async with AsyncNavi(
        "http://navi.test", "t", transport=transport, retry_max_attempts=2
    ) as navi:
        with pytest.raises(Unavailable):
            await navi.me()
    assert len(script.requests) == 2
