"""`--ab NAME[,NAME…]` of bench-locomo and bench-lme: retrieval settings tried against the
shipped ones over the same ingest, in the same run (issue 31's A/B).

A variant sets module constants of the search (read at call time) for one pass of the
questions and puts them back after it. Add one here to try it; keep it in the code only
when the A/B on both benchmarks says so (docs/performance.md, "Retrieval A/B")."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SEARCH = "app.domain.raw_history.search"
RANKING = "app.domain.raw_history.ranking"
WHEN = "app.domain.kernel.when"
RENDER = "app.domain.search.render"

VARIANTS: dict[str, dict[tuple[str, str], Any]] = {
    # the search before issue 31's A/B (both kept: docs/performance.md, "Retrieval A/B")
    "before": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 1.0, (SEARCH, "SESSION_DECAY"): 1.0},
    "no-spread": {(SEARCH, "SESSION_DECAY"): 1.0},
    "no-own": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 1.0},
    "spread": {(SEARCH, "SESSION_DECAY"): 0.7},
    "spread5": {(SEARCH, "SESSION_DECAY"): 0.5},
    "spread9": {(SEARCH, "SESSION_DECAY"): 0.9},
    "wide": {(SEARCH, "VECTOR_CANDIDATES"): 30, (SEARCH, "TEXT_CANDIDATES"): 30},
    "wide+spread": {
        (SEARCH, "VECTOR_CANDIDATES"): 30,
        (SEARCH, "TEXT_CANDIDATES"): 30,
        (SEARCH, "SESSION_DECAY"): 0.7,
    },
    "text4": {(RANKING, "TEXT_WEIGHT"): 0.4},
    "text6": {(RANKING, "TEXT_WEIGHT"): 0.6},
    "text7": {(RANKING, "TEXT_WEIGHT"): 0.7},
    "ctx0": {(RANKING, "CONTEXT_WEIGHT"): 0.0},
    "ctx5": {(RANKING, "CONTEXT_WEIGHT"): 0.5},
    "own8": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 0.8},
    "own6": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 0.6},
    "own4": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 0.4},
    "own3": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 0.3},
    "own2": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 0.2},
    "own4+spread": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 0.4, (SEARCH, "SESSION_DECAY"): 0.7},
    "own3+spread": {(RANKING, "OTHER_SPEAKER_WEIGHT"): 0.3, (SEARCH, "SESSION_DECAY"): 0.7},
    "text6+spread": {(RANKING, "TEXT_WEIGHT"): 0.6, (SEARCH, "SESSION_DECAY"): 0.7},
    # issue 44: the question's time (`kernel.when`)
    "no-time": {(WHEN, "OUTSIDE_WINDOW"): 1.0, (WHEN, "ORDER_WEIGHT"): 0.0},
    "window3": {(WHEN, "OUTSIDE_WINDOW"): 0.3},
    "window7": {(WHEN, "OUTSIDE_WINDOW"): 0.7},
    "order1": {(WHEN, "ORDER_WEIGHT"): 0.1},
    "order2": {(WHEN, "ORDER_WEIGHT"): 0.2},
    "order4": {(WHEN, "ORDER_WEIGHT"): 0.4},
    "date": {(RENDER, "RAW_TIME"): "date"},
    "asked": {(RENDER, "RAW_TIME"): "asked"},
    "datetime": {(RENDER, "RAW_TIME"): "datetime"},
    # a day mark on the lines of an excerpt whose messages span several days (`line_days`)
    "no-line-days": {(RENDER, "LINE_DAYS"): False},
    "line-days-year": {("app.domain.raw_history.line_days", "MARK_YEAR"): True},
    # the named speaker's own lines (`ranking.NAMED_OTHER_WEIGHT`)
    "named4": {(RANKING, "NAMED_OTHER_WEIGHT"): 0.4},
    "named6": {(RANKING, "NAMED_OTHER_WEIGHT"): 0.6},
    "named-off": {(RANKING, "NAMED_OTHER_WEIGHT"): 1.0},
    # a focus line's whole message (`render.WHOLE_MESSAGES`, `MESSAGE_CHARS`)
    "msg-off": {(RENDER, "WHOLE_MESSAGES"): "off"},
    "msg-all": {(RENDER, "WHOLE_MESSAGES"): "all"},
    "msg-you": {(RENDER, "WHOLE_MESSAGES"): "you"},
    "msg-2k": {(RENDER, "MESSAGE_CHARS"): 2000},
    "msg-all-2k": {(RENDER, "WHOLE_MESSAGES"): "all", (RENDER, "MESSAGE_CHARS"): 2000},
    "no-time+datetime": {
        (WHEN, "OUTSIDE_WINDOW"): 1.0,
        (WHEN, "ORDER_WEIGHT"): 0.0,
        (RENDER, "RAW_TIME"): "datetime",
    },
}


def parse(spec: str | None) -> list[str]:
    """The variant names of `--ab` (comma-separated), checked."""
    names = [n.strip() for n in (spec or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(
            f"--ab: unknown variant {', '.join(unknown)} (known: {', '.join(VARIANTS)})"
        )
    return names


@contextmanager
def applied(name: str) -> Iterator[None]:
    """The search with variant `name`'s settings, restored afterwards."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for (module, attr), value in VARIANTS[name].items():
            mod = importlib.import_module(module)
            saved.append((mod, attr, getattr(mod, attr)))
            setattr(mod, attr, value)
        yield
    finally:
        for mod, attr, value in reversed(saved):
            setattr(mod, attr, value)


def describe(name: str) -> str:
    return ", ".join(f"{attr}={v}" for (_, attr), v in VARIANTS[name].items())
