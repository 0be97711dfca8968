"""Extraction's pure half: transcript rendering, head+tail clipping, lenient parsing."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from app.domain.facts.services import default_confidence, normalise_name, query_words
from app.domain.facts.transcript import (
    ExtractedFact,
    ReplyFormatError,
    clip_middle,
    parse_facts,
    render_transcript,
    states_facts,
)


def m(role: str, content: str = "", tool_calls=None, name=None):  # type: ignore[no-untyped-def]
    return SimpleNamespace(role=role, content=content, tool_calls=tool_calls, name=name)


def test_render_transcript() -> None:
    text = render_transcript(
        [
            m("user", "I use neovim"),
            m(
                "assistant",
                "",
                tool_calls=[
                    {"function": {"name": "read_file", "arguments": {"path": "~/.vimrc"}}},
                    {"function": {"name": "ls", "arguments": '{"p": "/"}'}},
                ],
            ),
            m("tool", "x" * 800, name="read_file"),
            m("tool", "ok"),
            m("assistant", "Nice config."),
            m("user", "   "),
        ]
    )
    lines = text.split("\n")
    assert lines[0] == "User: I use neovim"
    assert lines[1] == '[Tool call] read_file({"path":"~/.vimrc"})'
    assert lines[2] == '[Tool call] ls({"p": "/"})'
    assert lines[3] == "[Tool result] read_file: " + "x" * 500 + "…"
    assert lines[4] == "[Tool result] tool: ok"
    assert lines[5] == "Assistant: Nice config."
    assert len(lines) == 6


def test_clip_middle_keeps_head_and_tail() -> None:
    assert clip_middle("short", 100) == "short"
    text = "H" * 10_000 + "M" * 10_000 + "T" * 10_000
    out = clip_middle(text, 12_000)
    assert len(out) <= 12_000
    assert out.startswith("H" * 5000) and out.endswith("T" * 5000)
    assert "characters omitted" in out and "M" * 100 not in out


FACT = {"category": "preferences", "key": "editor", "value": "neovim", "source": "user_explicit"}


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps([FACT]),
        "```json\n" + json.dumps([FACT], indent=2) + "\n```",
        "Here are the facts I found:\n" + json.dumps([FACT]) + "\nLet me know!",
        json.dumps(FACT),
        "The fact: " + json.dumps(FACT) + " — that is all.",
        json.dumps({"facts": [FACT]}),
        "<think>maybe [1, 2]?</think>\n" + json.dumps([FACT]),
    ],
)
def test_parse_facts_finds_the_list(reply: str) -> None:
    facts = parse_facts(reply)
    assert facts == [ExtractedFact("preferences", "editor", "neovim", "user_explicit", None)]


def test_parse_facts_reads_loose_objects_and_brackets_in_prose() -> None:
    other = {"key": "shell", "value": "fish"}
    reply = f"Found [two, see below]:\n{json.dumps(FACT)}\n{json.dumps(other)}\nDone {{ok}}."
    assert [f.key for f in parse_facts(reply)] == ["editor", "shell"]


@pytest.mark.parametrize(
    "reply",
    [
        "[" + json.dumps(FACT) + ', {"category": "work", "key": "employer", "val',
        "[" + json.dumps(FACT),  # every object complete, the array never closed
        '{"key": "editor", "value": "neo',
        "```json\n[" + json.dumps(FACT) + ', {"key": "a", "value": "[x]\\"',
    ],
)
def test_parse_facts_refuses_a_cut_off_reply(reply: str) -> None:
    with pytest.raises(ReplyFormatError) as caught:
        parse_facts(reply)
    assert caught.value.reason == "cut_off"


def test_parse_facts_writes_scalars_and_scalar_lists_as_text() -> None:
    items = [
        {"key": "langs", "value": ["Go", "Rust", None], "source": "web", "source_context": 3},
        {"key": "age", "value": 41},
        {"key": "vegetarian", "value": True},
    ]
    facts = parse_facts(json.dumps(items))
    assert [(f.category, f.key, f.value, f.source) for f in facts] == [
        ("general", "langs", "Go, Rust", "conversation"),
        ("general", "age", "41", "conversation"),
        ("general", "vegetarian", "true", "conversation"),
    ]
    assert facts[0].source_context == "3"


@pytest.mark.parametrize(
    "bad",
    [
        {"key": "shell"},
        "a string",
        {"key": "k" * 201, "value": "v"},
        {"key": "pets", "value": {"cat": "Tom"}},
        {"key": "pets", "value": [{"cat": "Tom"}]},
        {"key": None, "value": "x"},
        {"key": "a\u0000b", "value": "x"},
    ],
)
def test_parse_facts_takes_a_reply_whole_or_not_at_all(bad: object) -> None:
    with pytest.raises(ReplyFormatError) as caught:
        parse_facts(json.dumps([FACT, bad, {"key": "age", "value": 41}]))
    assert caught.value.reason == "invalid_item"
    assert "1 of 3 items" in str(caught.value) and "item 1" in str(caught.value)


@pytest.mark.parametrize("reply", ["[]", "Nothing worth remembering: []", "```\n[]\n```"])
def test_parse_facts_empty_list_is_valid(reply: str) -> None:
    assert parse_facts(reply) == []


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I could not find anything.",
        "- editor: neovim",
        "{not json}",
        '{"a": 1}',
        '{"facts": "none"}',
        '{"facts": {"editor": "neovim"}}',
    ],
)
def test_parse_facts_malformed(reply: str) -> None:
    with pytest.raises(ReplyFormatError) as caught:
        parse_facts(reply)
    assert caught.value.reason == "not_json"


def test_states_facts() -> None:
    assert states_facts("User: hi\nUser: By the way, I live in Porto.") == "i live in"
    assert states_facts("User: My name is Ana") == "my name is"
    assert states_facts("User: my favourite editor is helix") == "my favourite editor is"
    assert states_facts("Assistant: I live in the cloud.\nUser: ok") is None
    assert states_facts("User: what is the time in Lisbon?") is None


def test_small_rules() -> None:
    assert default_confidence("tool_call") == 95
    assert default_confidence("auto_discovery") == 95
    assert default_confidence("user_explicit") == 90
    assert default_confidence("conversation") == 70
    assert default_confidence(None) == 70
    assert normalise_name("  Home  City ") == "home_city"
    assert query_words("What is the user's EDITOR? editor!") == ["user", "editor"]
    assert query_words("the of") == ["the", "of"]
    assert query_words("??") == ["??"]


def test_said_at_finds_the_message_a_fact_came_from() -> None:
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from app.domain.facts.transcript import ExtractedFact, SaidAt, said_at

    def msg(seq: int, role: str, content: str) -> SimpleNamespace:
        at = datetime(2023, 5, 1, 10, 0, seq, tzinfo=UTC)
        return SimpleNamespace(sequence_number=seq, role=role, content=content, created_at=at)

    messages = [
        msg(0, "user", "I live in  LISBON, by the river."),
        msg(1, "assistant", "You live in Lisbon, nice."),
        msg(2, "user", "My editor is Helix."),
        msg(3, "assistant", "Noted."),
    ]

    def fact(value: str, context: str | None) -> ExtractedFact:
        return ExtractedFact("general", "k", value, "conversation", context)

    found = said_at(
        messages,
        [
            fact(
                "Lisbon", "User: I live in Lisbon, by the river."
            ),  # the quote, case and spacing aside
            fact("Helix", "paraphrase the model made up"),  # then the value
            fact("Vim", None),  # neither: the transcript's last message
        ],
    )
    assert [f.sequence_number for f in found if isinstance(f, SaidAt)] == [0, 2, 3]
    assert said_at([], [fact("x", None)]) == [None]
