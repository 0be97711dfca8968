"""Small builders for conversations used by the planner/truncate tests."""

from __future__ import annotations

from app.domain.compression import Msg

PER_MESSAGE = 10


def est(messages: list[Msg]) -> int:
    """A simple additive estimator: content length plus a per-message overhead."""
    return sum(len(m.content) + PER_MESSAGE for m in messages)


def user(text: str = "question", **kw: object) -> Msg:
    return Msg("user", text, **kw)  # type: ignore[arg-type]


def asst(text: str = "answer", **kw: object) -> Msg:
    return Msg("assistant", text, **kw)  # type: ignore[arg-type]


def system(text: str = "sys") -> Msg:
    return Msg("system", text)


def tool_group(n_results: int = 1, size: int = 10, *, critical: bool = False) -> list[Msg]:
    calls = [{"function": {"name": f"t{i}", "arguments": {"i": i}}} for i in range(n_results)]
    out = [Msg("assistant", "", tool_calls=calls)]
    out += [
        Msg("tool", "r" * size, name=f"t{i}", is_compression_critical=critical)
        for i in range(n_results)
    ]
    return out


def turn(text: str = "question", answer: str = "answer", groups: int = 0) -> list[Msg]:
    msgs = [user(text)]
    for _ in range(groups):
        msgs += tool_group()
    msgs.append(asst(answer))
    return msgs


def ids(messages: list[Msg]) -> list[int]:
    return [id(m) for m in messages]
