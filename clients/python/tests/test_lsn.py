"""Read-your-writes: the newest `Navi-Write-LSN` a client saw goes out as `Navi-Min-LSN`
on its later requests (units, with httpx.MockTransport)."""

from __future__ import annotations

import httpx
import pytest

from navi_client import AsyncNavi, LsnTracker, Navi, parse_lsn


def test_parse_lsn() -> None:
    assert parse_lsn("0/0") == 0
    assert parse_lsn("0/16B3748") == 0x16B3748
    assert parse_lsn("1/0") == 1 << 32
    assert parse_lsn("a/ff") == (0xA << 32) | 0xFF
    for bad in (None, "", "16B3748", "0/", "/1", "123456789/0", "0/123456789", "x/1", "1/2/3"):
        assert parse_lsn(bad) is None, bad


def test_only_a_newer_position_replaces_the_one_kept() -> None:
    lsn = LsnTracker()
    assert lsn.current is None
    assert lsn.observe("0/FFFFFFFF")
    # compared as numbers, not as text: 1/0 is after 0/FFFFFFFF, 9/... before A/...
    assert lsn.observe("1/0") and lsn.current == "1/0"
    assert not lsn.observe("0/FFFFFFFF") and lsn.current == "1/0"
    assert not lsn.observe("1/0")
    assert lsn.observe("9/FFFFFFFF") and lsn.observe("A/1") and lsn.current == "A/1"
    assert not lsn.observe("not-an-lsn") and not lsn.observe(None) and lsn.current == "A/1"


class Recorder:
    """A MockTransport handler: answers 200 `{}` with the scripted write positions and
    records each request's `Navi-Min-LSN`."""

    def __init__(self, writes: list[str | None]) -> None:
        self.writes = list(writes)
        self.sent: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.headers.get("navi-min-lsn"))
        write = self.writes.pop(0) if self.writes else None
        headers = {"Navi-Write-LSN": write} if write else {}
        return httpx.Response(200, json={"id": "u", "name": "n"}, headers=headers)


WRITES = [None, "0/16B3748", None, "0/16B0000", "1/10", None]
EXPECTED = [None, None, "0/16B3748", "0/16B3748", "0/16B3748", "1/10"]


def test_the_client_echoes_the_newest_write() -> None:
    rec = Recorder(WRITES)
    with Navi("http://navi.test", "t", transport=httpx.MockTransport(rec)) as navi:
        for _ in WRITES:
            navi.me()
        assert navi.write_lsn == "1/10"
    assert rec.sent == EXPECTED


async def test_the_async_client_echoes_the_newest_write() -> None:
    rec = Recorder(WRITES)
    async with AsyncNavi("http://navi.test", "t", transport=httpx.MockTransport(rec)) as navi:
        for _ in WRITES:
            await navi.me()
        assert navi.write_lsn == "1/10"
    assert rec.sent == EXPECTED


def test_an_error_answer_carries_a_position_too() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/me":
            return httpx.Response(200, json={"id": "u", "name": "n"})
        body = {"error": "conflict", "detail": "x"}
        return httpx.Response(409, json=body, headers={"Navi-Write-LSN": "2/0"})

    with Navi("http://navi.test", "t", transport=httpx.MockTransport(handler)) as navi:
        with pytest.raises(Exception, match="409"):
            navi.compact("s")
        assert navi.write_lsn == "2/0"


def test_a_position_carried_over() -> None:
    rec = Recorder([])
    with Navi("http://navi.test", "t", write_lsn="3/4", transport=httpx.MockTransport(rec)) as navi:
        navi.me()
    assert rec.sent == ["3/4"]
