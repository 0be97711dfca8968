"""Splitting a context into system messages, turns and tool-call groups.

* A **turn** is one ``user`` message plus every following non-user message up
  to the next ``user`` message. Messages before the first user message form
  a *leading* turn without a request.
* An existing summary (``role=user``, ``is_summary=True``) therefore starts a
  turn of its own.
* A **tool unit** is an assistant message carrying ``tool_calls`` together
  with every ``tool`` message that directly follows it; any other message is
  a unit by itself. Units are never split by any partition in this package.
* ``system`` messages are taken out before any of this (they are never
  summarized or dropped), so grouping is computed on the non-system sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .types import Msg

__all__ = ["Turn", "flatten", "split_system", "split_turns", "tool_units"]


@dataclass
class Turn:
    """A run of conversation messages; ``start`` is its offset in the conversation."""

    messages: list[Msg]
    start: int = 0

    @property
    def request(self) -> Msg | None:
        """The user message opening the turn (None for the leading turn)."""
        if self.messages and self.messages[0].role == "user":
            return self.messages[0]
        return None

    @property
    def is_leading(self) -> bool:
        return self.request is None

    @property
    def is_summary(self) -> bool:
        req = self.request
        return req is not None and req.is_summary

    @property
    def body(self) -> list[Msg]:
        """Everything after the request (the whole turn when leading)."""
        return self.messages[1:] if self.request is not None else list(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


def split_system(messages: Iterable[Msg]) -> tuple[list[Msg], list[Msg]]:
    """``(system messages, everything else)``, each in original order."""
    system: list[Msg] = []
    rest: list[Msg] = []
    for m in messages:
        (system if m.role == "system" else rest).append(m)
    return system, rest


def split_turns(conversation: Sequence[Msg]) -> list[Turn]:
    """Partition a system-free message list into consecutive turns."""
    turns: list[Turn] = []
    current: list[Msg] = []
    start = 0
    for i, m in enumerate(conversation):
        if m.role == "user" and current:
            turns.append(Turn(current, start))
            current = []
            start = i
        current.append(m)
    if current:
        turns.append(Turn(current, start))
    return turns


def tool_units(messages: Sequence[Msg]) -> list[list[Msg]]:
    """Group messages so an assistant tool call and its results stay together."""
    units: list[list[Msg]] = []
    for m in messages:
        if m.role == "tool" and units and _opens_tool_group(units[-1]):
            units[-1].append(m)
        else:
            units.append([m])
    return units


def _opens_tool_group(unit: list[Msg]) -> bool:
    return unit[0].has_tool_calls and all(x.role == "tool" for x in unit[1:])


def flatten(groups: Iterable[Turn | list[Msg]]) -> list[Msg]:
    out: list[Msg] = []
    for g in groups:
        out.extend(g.messages if isinstance(g, Turn) else g)
    return out
