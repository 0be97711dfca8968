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
    facts, problems = parse_facts(reply)
    assert facts == [ExtractedFact("preferences", "editor", "neovim", "user_explicit", None)]
    assert problems == []


def test_parse_facts_rescues_a_truncated_array() -> None:
    reply = "[" + json.dumps(FACT) + ', {"category": "work", "key": "employer", "val'
    facts, _ = parse_facts(reply)
    assert [f.key for f in facts] == ["editor"]


def test_parse_facts_reports_every_dropped_item() -> None:
    items = [
        FACT,
        {"key": "shell"},
        "a string",
        {"key": "k" * 201, "value": "v"},
        {"key": "langs", "value": ["Go", "Rust"], "source": "web", "source_context": 3},
        {"key": "age", "value": 41},
    ]
    facts, problems = parse_facts(json.dumps(items))
    assert [(f.category, f.key, f.value, f.source) for f in facts] == [
        ("preferences", "editor", "neovim", "user_explicit"),
        ("general", "langs", "Go, Rust", "conversation"),
        ("general", "age", "41", "conversation"),
    ]
    assert facts[1].source_context == "3"
    assert len(problems) == 3 and problems[0].startswith("item 1")


@pytest.mark.parametrize("reply", ["[]", "Nothing worth remembering: []", "```\n[]\n```"])
def test_parse_facts_empty_list_is_valid(reply: str) -> None:
    assert parse_facts(reply) == ([], [])


@pytest.mark.parametrize(
    "reply", ["", "I could not find anything.", "- editor: neovim", "{not json}", '{"a": 1}']
)
def test_parse_facts_malformed(reply: str) -> None:
    with pytest.raises(ReplyFormatError):
        parse_facts(reply)


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
