"""app/lib/inputs.py: NUL scrubbing and refusal, JSON depth, the pattern message."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any

import msgspec
import pytest

from app.lib.errors import Unprocessable
from app.lib.inputs import (
    MAX_JSON_DEPTH,
    NUL_PATTERN,
    check_depth,
    check_time,
    explain_pattern,
    reject_nul,
    scrub,
    scrub_text,
)


def nested(depth: int) -> Any:
    """A value of exactly `depth` levels of arrays (built without recursion)."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_scrub_replaces_every_nul_in_strings_keys_and_lists() -> None:
    value = {"a\x00": ["x\x00y", {"k": "\x00"}, 3, None], "plain": "ok"}
    out, changed = scrub(value)
    assert changed
    assert out == {"a\ufffd": ["x\ufffdy", {"k": "\ufffd"}, 3, None], "plain": "ok"}
    assert value["a\x00"][0] == "x\x00y"  # the input is not modified


def test_scrub_returns_the_same_object_when_clean() -> None:
    value = {"a": ["b", {"c": 1.5}], "d": True}
    out, changed = scrub(value)
    assert not changed and out is value
    assert scrub(None) == (None, False)
    literal = {"text": "the escape \\u0000 written out"}  # looks like one when encoded
    assert scrub(literal) == (literal, False)
    assert scrub_text("clean") == "clean" and scrub_text("a\x00b\x00") == "a\ufffdb\ufffd"


def test_reject_nul_names_the_field() -> None:
    assert reject_nul("fine", "name") == "fine"
    assert reject_nul(None, "name") is None
    with pytest.raises(Unprocessable, match=r"^section: must not contain a NUL"):
        reject_nul("a\x00b", "section")


def test_depth_limit_is_inclusive_and_names_the_place() -> None:
    check_depth({"a": nested(MAX_JSON_DEPTH - 1)})  # exactly 32 levels
    check_depth("scalar")
    with pytest.raises(Unprocessable) as err:
        check_depth({"messages": [{"metadata": {"a": nested(MAX_JSON_DEPTH)}}]})
    assert err.value.detail.startswith("messages[0].metadata.a[0]")
    assert f"more than {MAX_JSON_DEPTH} levels" in err.value.detail


def test_depth_of_100000_levels_is_refused_without_recursion() -> None:
    deep = nested(100_000)
    limit = sys.getrecursionlimit()
    started = time.perf_counter()
    with pytest.raises(Unprocessable):
        check_depth({"entry": deep})
    assert time.perf_counter() - started < 1.0
    assert sys.getrecursionlimit() == limit


class Named(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(pattern=NUL_PATTERN)]


def test_pattern_message_in_plain_words() -> None:
    with pytest.raises(msgspec.ValidationError) as err:  # the message msgspec itself writes
        msgspec.json.decode(b'{"name": "a\\u0000b"}', type=Named)
    assert explain_pattern(str(err.value)) == (
        "must not contain a NUL character (U+0000) - at `$.name`"
    )
    assert msgspec.json.decode(b'{"name": "ab"}', type=Named).name == "ab"
    assert explain_pattern("Expected `int` <= 5") == "Expected `int` <= 5"


def test_times_stay_inside_what_python_reads_back() -> None:
    ok = datetime(2025, 5, 1, tzinfo=UTC)
    assert check_time(ok, "t") is ok
    assert check_time(datetime(9999, 12, 30), "t").year == 9999  # naive is UTC
    for bad in (
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14))),
        datetime(1, 1, 1, 12, tzinfo=timezone(timedelta(hours=14))),
        datetime(1, 1, 1),
    ):
        with pytest.raises(Unprocessable, match=r"^at: out of range"):
            check_time(bad, "at")
