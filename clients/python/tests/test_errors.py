"""Non-2xx answers raise `NaviError` subclasses carrying the `{error, detail}` body."""

from __future__ import annotations

import uuid

import httpx
import pytest

from navi_client import (
    ClientError,
    Conflict,
    ContextTooLarge,
    Forbidden,
    Navi,
    NaviError,
    NotFound,
    PayloadTooLarge,
    ServerError,
    Unauthorized,
    Unavailable,
    Unprocessable,
)
from navi_client._errors import error_for, parse_retry_after

from conftest import Live


def test_404_carries_status_error_and_detail(navi: Navi) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(NotFound) as info:
        navi.get_session(missing)
    e = info.value
    assert (e.status, e.error) == (404, "not_found")
    assert missing in e.detail
    assert e.body == {"error": "not_found", "detail": e.detail}
    assert isinstance(e, ClientError) and isinstance(e, NaviError)
    assert str(e) == f"404 not_found: {e.detail}"


def test_another_users_session_is_404_too(live: Live, navi: Navi) -> None:
    session = navi.create_session()
    _, other_token = live.new_user()
    with Navi(live.base_url, other_token) as other, pytest.raises(NotFound):
        other.get_session(session.id)


def test_401_422_409_403(live: Live, navi: Navi, user: tuple[str, str]) -> None:
    with Navi(live.base_url, "navi_not_a_token") as stranger, pytest.raises(Unauthorized) as info:
        stranger.me()
    assert info.value.status == 401 and info.value.detail

    with pytest.raises(Unprocessable) as unprocessable:
        navi.create_session("no-such-profile")
    assert unprocessable.value.error == "unprocessable"
    assert "no-such-profile" in unprocessable.value.detail

    session = navi.create_session()
    with pytest.raises(Conflict) as conflict:  # nothing to compact yet
        navi.compact(session.id)
    assert conflict.value.status == 409 and "compact" in conflict.value.detail

    with pytest.raises(Forbidden):  # an admin route
        navi.admin_list_users()


def test_error_for_shapes() -> None:
    e = error_for(413, b'{"error":"payload_too_large","detail":"value: at most 65536"}')
    assert isinstance(e, PayloadTooLarge) and e.detail == "value: at most 65536"

    body = b'{"error":"context_too_large","detail":"too big","tokens":9000,"limit":4096}'
    e = error_for(422, body)
    assert isinstance(e, ContextTooLarge) and isinstance(e, Unprocessable)
    assert (e.tokens, e.limit) == (9000, 4096)

    # a proxy's page, not the service's body
    e = error_for(502, b"<html>Bad Gateway</html>")
    assert isinstance(e, ServerError) and e.error == "http_502" and "Bad Gateway" in e.detail
    e = error_for(418, b"")
    assert type(e) is ClientError and (e.error, e.detail) == ("http_418", "")

    e = error_for(503, b'{"error":"unavailable","detail":"x"}', httpx.Headers({"Retry-After": "2"}))
    assert isinstance(e, Unavailable) and e.retry_after == 2.0


def test_parse_retry_after() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:07 GMT", now=now) == 7.0
