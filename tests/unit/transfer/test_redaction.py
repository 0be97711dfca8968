"""An imported record checked against the forget records (pure): the columns a forget
redacts, and what was computed from the old text dropped."""

from __future__ import annotations

import uuid

import pytest

from app.domain.kernel.forgotten import MARKER, NOTHING, Forgotten, entry_of
from app.domain.raw_history.chunks import content_hash
from app.domain.transfer.redaction import ImportRedaction, check_entries

AT = "2026-12-05T00:00:00+00:00"
SECRET = "K7-VAULT-3141"


def redaction() -> ImportRedaction:
    return ImportRedaction(Forgotten.of([entry_of(SECRET, AT)]))


def test_a_message_is_redacted_and_its_vector_dropped() -> None:
    r = redaction()
    sid = uuid.uuid4()
    msg = {
        "session_id": sid,
        "sequence_number": 3,
        "role": "user",
        "content": f"code {SECRET}",
        "thinking": None,
        "tool_calls": [{"function": {"name": "f", "arguments": {"x": SECRET.lower()}}}],
        "metadata": {"source": SECRET, "note": SECRET},
    }
    out = r.apply("message", msg)
    assert out["content"] == f"code {MARKER}" and out["role"] == "user"
    assert out["tool_calls"][0]["function"]["arguments"]["x"] == MARKER
    assert out["metadata"] == {"source": SECRET, "note": MARKER}  # machinery kept
    assert r.drops("message_embedding", {"session_id": sid, "sequence_number": 3})
    assert not r.drops("message_embedding", {"session_id": sid, "sequence_number": 4})


def test_a_chunk_gets_a_new_hash_and_no_vectors() -> None:
    r = redaction()
    cid = uuid.uuid4()
    chunk = {"id": cid, "content": f"a {SECRET}", "breadcrumbs": [SECRET, "vault"]}
    out = r.apply("chunk", {**chunk, "content_hash": content_hash(chunk["content"])})
    assert out["content"] == f"a {MARKER}" and out["breadcrumbs"] == ["vault"]
    assert out["content_hash"] == content_hash(f"a {MARKER}") and out["vectors_stale"]
    assert r.drops("chunk_vector", {"chunk_id": cid})


def test_a_fact_is_kept_redacted_without_its_vector() -> None:
    out = redaction().apply("fact", {"key": "vault", "value": SECRET, "embedding": [0.1]})
    assert out == {"key": "vault", "value": MARKER, "embedding": None}


def test_unchanged_and_unchecked_records_are_left_alone() -> None:
    r = redaction()
    share = {"token": SECRET}  # not a text column of a forget's
    assert r.apply("share", share) is share
    plain = {"content": "nothing here"}
    assert r.apply("message", plain) is plain
    assert ImportRedaction(NOTHING).apply("message", {"content": SECRET})["content"] == SECRET
    assert r.redacted == 0


def test_the_files_records_are_checked() -> None:
    e = entry_of(SECRET, AT)
    assert check_entries([e]) == [e]
    for bad in (
        "x",
        [1],
        [{**e, "digest": "XYZ"}],
        [{**e, "bytes": 0}],
        [{**e, "at": 1}],
        [{**e, "sum": -1}],
    ):
        with pytest.raises(ValueError):
            check_entries(bad)
