"""The chat's cards (app/console/chat_cards.py): pure, over stored messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.console.chat_cards import card_of, chat_cards, image_url, waiting_for
from app.domain.kernel.messages import MessageOut

SID = "00000000-0000-0000-0000-000000000001"


def _m(seq: int, role: str, content: str = "", **kw: Any) -> MessageOut:
    return MessageOut(
        sequence_number=seq,
        display_index=seq,
        role=role,
        content=content,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        **kw,
    )


def _call(cid: str, name: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": {"a": 1}}}


def test_system_messages_other_than_service_records_are_not_shown() -> None:
    note = _m(1, "system", "internal", metadata={"source": "task_note"})
    record = _m(2, "system", "dispatcher says", metadata={"source": "synapse_event"})
    plain = _m(3, "system", "a prompt")
    cards = chat_cards([note, record, plain], SID, [])
    assert [(c.kind, c.text.shown) for c in cards] == [("service", "dispatcher says")]


def test_plans_usage_and_published_cards() -> None:
    plan = card_of(_m(1, "assistant", "1. a", is_plan=True), SID, {})
    assert plan is not None and plan.kind == "plan"
    answer = card_of(_m(2, "assistant", "hi", metadata={"usage": {"in": 40, "out": 2}}), SID, {})
    assert answer is not None and answer.usage is not None
    assert (answer.usage.tokens_in, answer.usage.tokens_out, answer.usage.context_after) == (
        40,
        2,
        42,
    )
    card = {"type": "pdf", "content_type": "application/pdf", "size": 9, "name": "a b.pdf"}
    tool = card_of(
        _m(3, "tool", "Published", name="content_publish", metadata={"card": card}), SID, {}
    )
    assert tool is not None and tool.viewer is not None
    assert tool.viewer.url == f"/console/chat/{SID}/files/a%20b.pdf" and tool.viewer.inline
    model = card_of(
        _m(4, "tool", "x", metadata={"card": {**card, "type": "model", "name": "m.stl"}}), SID, {}
    )
    assert model is not None and model.viewer is not None and not model.viewer.inline


def test_only_recognised_image_bytes_become_data_urls() -> None:
    assert image_url("iVBORw0KGgoAAAA") == "data:image/png;base64,iVBORw0KGgoAAAA"
    assert image_url("PHN2Zz4=") is None  # an SVG is never drawn from a data: URL here


def test_waiting_for_is_the_last_rounds_unanswered_calls() -> None:
    ask = _m(1, "assistant", tool_calls=[_call("c1", "memory"), _call("c2", "book_flight")])
    done = _m(2, "tool", "ok", tool_call_id="c1", name="memory")
    assert waiting_for([ask, done]) == ["book_flight"]
    assert waiting_for([ask, done, _m(3, "user", "never mind")]) == []
    cards = chat_cards([ask, done], SID, [])
    assert cards[0].waiting == ["book_flight"]
    assert chat_cards([ask, done], SID, [], newest=False)[0].waiting == []
