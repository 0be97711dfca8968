"""The pure side of forget: the text's check, its literal matching, JSON redaction."""

from __future__ import annotations

import json

import pytest

from app.domain.forget.redact import (
    MARKER,
    Needle,
    check_text,
    redact_json,
    redact_text,
    text_hash,
)
from app.domain.forget.tool import redact_round
from app.domain.kernel.messages import MessageIn
from app.lib.errors import Unprocessable

WEIRD = "a.b*c%_\\"


def test_check_text_strips_and_bounds() -> None:
    assert check_text("  abc \n") == "abc"
    assert check_text("x" * 1000) == "x" * 1000
    for bad in ("", "ab", "  ab  ", "x" * 1001, "ab\x00c", "forgot", "[FORGOTTEN]"):
        with pytest.raises(Unprocessable) as err:
            check_text(bad)
        assert err.value.detail.startswith("text: ")


def test_regex_metacharacters_match_literally() -> None:
    n = Needle(WEIRD)
    assert redact_text(n, f"x {WEIRD} y {WEIRD.upper()}") == f"x {MARKER} y {MARKER}"
    for decoy in ("aXbbbc%_\\", "a.b*cZZ\\", "a.bbbc%_\\", "a.b*c%_/"):
        assert redact_text(n, decoy) == decoy
        assert not n.found_in(decoy)
    assert redact_text(n, None) is None
    assert redact_text(Needle("(?i)x"), "(?I)X and (?i)x") == f"{MARKER} and {MARKER}"


def test_like_patterns_escape_wildcards_and_backslash() -> None:
    n = Needle(WEIRD)
    assert n.like == "%a.b*c\\%\\_\\\\%"
    # inside JSON text the backslash is itself escaped (as jsonb prints it)
    assert n.json_like == "%a.b*c\\%\\_\\\\\\\\%"
    assert Needle('say "hi"').json_like == '%say \\\\"hi\\\\"%'
    assert Needle("Zürich").json_like == "%Zürich%"


def test_json_string_values_redacted_keys_and_machinery_kept() -> None:
    n = Needle("P-123")
    value = {
        "p-123": ["p-123", 5, None, True, {"deep": "a P-123 b"}],
        "source": "P-123",
        "args": '{"n": "P-123"}',
    }
    out = redact_json(n, value, keep_keys=("source",))
    assert out == {
        "p-123": [MARKER, 5, None, True, {"deep": f"a {MARKER} b"}],
        "source": "P-123",
        "args": f'{{"n": "{MARKER}"}}',
    }
    assert json.loads(json.dumps(out)) == out
    assert redact_json(n, None) is None


def test_text_hash_is_a_short_sha256_prefix() -> None:
    assert text_hash("abc") == "ba7816bf8f01cfea"
    assert "abc" not in text_hash("abc")


def test_redact_round_redacts_the_assistant_message_of_a_forget_call() -> None:
    call = {"id": "c1", "function": {"name": "memory", "arguments": {"text": "X-99"}}}
    message = MessageIn(role="assistant", content="forgetting x-99", tool_calls=[call])
    calls = [("c1", "memory", {"action": "forget", "text": " x-99 "})]
    ok = [MessageIn(role="tool", content="Forgot", tool_call_id="c1")]
    failed = [MessageIn(role="tool", content="no", tool_call_id="c1", metadata={"is_error": True})]
    out = redact_round(message, calls, ok)
    assert out.content == f"forgetting {MARKER}"
    assert out.tool_calls == [
        {"id": "c1", "function": {"name": "memory", "arguments": {"text": MARKER}}}
    ]
    assert redact_round(message, calls, failed) == message
    search = [("c1", "memory", {"action": "search", "text": "x-99"})]
    assert redact_round(message, search, ok) == message
