"""Who speaks in a raw chunk, and whom a question is about.

A chunk writes each message after a `User: ` / `Assistant: ` / `Tool result: ` label; a
line without a label continues the message above it (a chunk may start inside a
message: its first lines then belong to that message). A question is *first person*
when it asks about the user in their own words ("where do I keep my…") and *second
person* when it asks what the assistant said ("what did you recommend…").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "first_person",
    "message_ranges",
    "query_names",
    "second_person",
    "speaker_names",
    "user_lines",
]

Span = tuple[int, int]

_FIRST_PERSON = frozenset({"i", "i'm", "i've", "i'd", "i'll", "my", "me", "mine", "myself"})
_SECOND_PERSON = frozenset({"you", "your", "you're", "you've", "yours", "yourself"})
_SPEAKER = re.compile(r"(User|Assistant|Tool result[^:\n]*): ")
# a transcript's own speaker after the role label ("User: Maria: …", an imported group chat)
_NAMED = re.compile(r"(?:User|Assistant): ([A-Z][^\W\d_]*(?: [A-Z][^\W\d_]*){0,2}): ")
_NAME_WORD = re.compile(r"\b[A-Z][^\W\d_]+")


def _words(query: str) -> set[str]:
    return {w.strip(".,;:!?\"'()") for w in query.lower().replace("’", "'").split()}


def first_person(query: str) -> bool:
    """The query asks about the user in their own words ("where do I keep my…") and not
    about what the assistant said ("what did you recommend…")."""
    words = _words(query)
    return bool(words & _FIRST_PERSON) and not words & _SECOND_PERSON


def second_person(query: str) -> bool:
    """The query asks what the assistant said, wrote or recommended ("you")."""
    return bool(_words(query) & _SECOND_PERSON)


def _message_labels(text: str, spans: Sequence[Span]) -> list[int | None]:
    """Per line of a chunk: where the labelled line that opens its message starts (None
    for the lines before the first label)."""
    out: list[int | None] = []
    label: int | None = None
    for a, _ in spans:
        if _SPEAKER.match(text, a):
            label = a
        out.append(label)
    return out


def user_lines(text: str, spans: Sequence[Span]) -> list[bool]:
    """Per line of a chunk: whether it belongs to a message the user wrote."""
    return [a is not None and text.startswith("User: ", a) for a in _message_labels(text, spans)]


def message_ranges(text: str, spans: Sequence[Span]) -> list[tuple[int, int]]:
    """Per line of a chunk: the (first, last) line indexes of the message it belongs to
    (a labelled line opens a message; the lines before the first label form one)."""
    starts = [i for i, (a, _) in enumerate(spans) if i == 0 or _SPEAKER.match(text, a)]
    out: list[tuple[int, int]] = []
    for n, first in enumerate(starts):
        last = (starts[n + 1] if n + 1 < len(starts) else len(spans)) - 1
        out.extend((first, last) for _ in range(first, last + 1))
    return out


def query_names(query: str) -> frozenset[str]:
    """The capitalised words of `query` (the names it may ask about: "What did Maria…")."""
    return frozenset(_NAME_WORD.findall(query or ""))


def speaker_names(text: str, spans: Sequence[Span]) -> list[str | None]:
    """Per line of a chunk: the name its message's speaker gives after the role label
    (`User: Maria: …`), or None (no name, or a tool result)."""
    labels = _message_labels(text, spans)
    names = {a: m.group(1) for a in set(labels) if a is not None and (m := _NAMED.match(text, a))}
    return [names.get(a) if a is not None else None for a in labels]
