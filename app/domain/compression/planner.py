"""Deciding *what* to summarize: the single decision point of compression.

:func:`plan_compression` is used both by the real compression and by the
dry run (:func:`would_compress`), so the prediction and the action can never
drift apart. It never calls an LLM and never mutates its input.

Turn mode
    Keep the newest ``keep_recent`` turns verbatim and summarize the older
    ones; while the kept region (system messages included) exceeds
    ``window × target`` drop the oldest kept turn, down to a single turn. The
    newest turn is always kept whole, even when it alone is over the target.
    Then one *importance swap* may happen: when the newest summarized turn is
    much more important than the oldest kept turn and that one is filler, the
    two trade places, provided the kept region still fits the target.

Intra-turn mode (``keep_recent_messages`` given)
    Used when turn mode has nothing to summarize, or when its kept region (one
    turn) is still over the target — the long autonomous loop, where one user
    request is followed by hundreds of tool iterations. Everything before the
    newest turn plus the older part of that turn is summarized; kept are the
    turn's request and its newest ``keep_recent_messages`` messages, rounded
    up to whole tool units. While that tail is over the target its oldest unit
    is dropped (the newest unit always stays). When this finds nothing, it is
    retried with ``keep_recent_messages=2``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from .turns import Turn, flatten, split_system, split_turns, tool_units
from .types import Msg

__all__ = [
    "FILLER_MAX_IMPORTANCE",
    "SWAP_MARGIN",
    "Estimator",
    "Plan",
    "is_acknowledgement",
    "partition_current_turn",
    "plan_compression",
    "turn_importance",
    "would_compress",
]

Estimator = Callable[[list[Msg]], int]

DEFAULT_TARGET = 0.65
INTRA_TURN_RETRY_MESSAGES = 2
# A kept turn scoring at most this is filler that may be swapped out (a plain
# question/answer scores 0; a bare "ok"/"thanks" from the user scores -1) …
FILLER_MAX_IMPORTANCE = -0.5
# … for an older turn scoring at least this much more.
SWAP_MARGIN = 3.0

_ACKS = frozenset(
    {
        "ok", "okay", "k", "kk", "thanks", "thank you", "thx", "ty", "cool", "nice",
        "great", "good", "got it", "sure", "yes", "no", "yep", "yeah", "nope", "fine",
        "alright", "continue", "go on", "go ahead", "lgtm", "done", "perfect", "wow",
        "ок", "спасибо", "понял", "хорошо", "да", "нет", "ага", "продолжай", "отлично",
    }
)  # fmt: skip
_DECISION_RE = re.compile(
    r"\b(remember|don'?t forget|do not forget|decided|decision|from now on|agreed|"
    r"important|requirement|must|always|never)\b|запомни|решили|важно|всегда|никогда",
    re.IGNORECASE,
)
_NON_WORD_RE = re.compile(r"[^\w\s']+", re.UNICODE)


@dataclass
class Plan:
    """Outcome of :func:`plan_compression`; each list keeps chronological order."""

    system: list[Msg] = field(default_factory=list)
    to_summarize: list[Msg] = field(default_factory=list)
    to_keep: list[Msg] = field(default_factory=list)
    mode: str = "none"  # "none" | "turns" | "intra_turn"
    kept_turns: int = 0
    swapped: bool = False

    @property
    def would_compress(self) -> bool:
        return bool(self.to_summarize)

    @property
    def kept(self) -> list[Msg]:
        """What stays verbatim: system messages followed by ``to_keep``."""
        return self.system + self.to_keep


def is_acknowledgement(text: str) -> bool:
    """Short, content-free replies such as "ok", "thanks!", "👍"."""
    stripped = text.strip()
    if not stripped:
        return True
    normalized = " ".join(_NON_WORD_RE.sub(" ", stripped.lower()).split())
    return not normalized or normalized in _ACKS or len(normalized) <= 2


def turn_importance(turn: Turn, critical_tools: Collection[str] = ()) -> float:
    """Heuristic value of keeping ``turn`` verbatim (higher = more important).

    Critical tool results, explicit decisions or "remember" requests, code
    blocks and long user messages raise the score; a bare acknowledgement
    from the user lowers it. Ordinary short exchanges score about 0.
    """
    score = 0.0
    has_code = has_decision = False
    critical = 0
    tool_calls = 0
    for m in turn.messages:
        text = m.content
        if m.role == "user" and not m.is_summary:
            size = len(text.strip())
            if size >= 1500:
                score += 3.0
            elif size >= 400:
                score += 2.0
            elif is_acknowledgement(text):
                score -= 1.0
        if m.role in ("user", "assistant"):
            has_code = has_code or "```" in text
            has_decision = has_decision or bool(_DECISION_RE.search(text))
        if m.role == "tool" and (m.is_compression_critical or (m.name or "") in critical_tools):
            critical += 1
        if m.has_tool_calls:
            tool_calls += 1
        if m.is_plan:
            score += 1.0
    score += 2.0 if has_code else 0.0
    score += 3.0 if has_decision else 0.0
    score += 3.0 * min(critical, 2)
    score += 0.5 * min(tool_calls, 4)
    return score


def _should_swap(candidate: Turn, oldest_kept: Turn, critical_tools: Collection[str]) -> bool:
    if candidate.is_leading or candidate.is_summary:
        return False
    if oldest_kept.is_leading or oldest_kept.is_summary:
        return False
    filler = turn_importance(oldest_kept, critical_tools)
    return (
        filler <= FILLER_MAX_IMPORTANCE
        and turn_importance(candidate, critical_tools) >= filler + SWAP_MARGIN
    )


def _plan_turns(
    system: list[Msg],
    turns: list[Turn],
    keep_recent: int,
    budget: float,
    estimate: Estimator,
    critical_tools: Collection[str] = (),
) -> Plan:
    n = len(turns)
    k = max(1, min(keep_recent, n))
    while k > 1 and estimate(system + flatten(turns[n - k :])) > budget:
        k -= 1
    kept = list(range(n - k, n))
    swapped = False
    if k >= 2 and n > k and _should_swap(turns[n - k - 1], turns[n - k], critical_tools):
        trial = [n - k - 1, *kept[1:]]
        if estimate(system + flatten(turns[i] for i in trial)) <= budget:
            kept = trial
            swapped = True
    kept_set = set(kept)
    return Plan(
        system=system,
        to_summarize=flatten(t for i, t in enumerate(turns) if i not in kept_set),
        to_keep=flatten(turns[i] for i in kept),
        mode="turns" if len(kept) < n else "none",
        kept_turns=len(kept),
        swapped=swapped,
    )


def _tail_start(units: list[list[Msg]], keep_messages: int) -> int:
    """Index of the first unit of the newest tail holding ``keep_messages`` messages."""
    start = len(units)
    count = 0
    while start > 0 and (start == len(units) or count < keep_messages):
        start -= 1
        count += len(units[start])
    return start


def partition_current_turn(turn: Turn, keep_recent_messages: int) -> tuple[list[Msg], list[Msg]]:
    """Split a turn's body into ``(older, newest)`` without splitting tool units.

    ``newest`` holds at least ``keep_recent_messages`` messages when the body
    has that many (rounded up to whole units) and always at least one unit.
    The request itself belongs to neither list.
    """
    units = tool_units(turn.body)
    start = _tail_start(units, keep_recent_messages)
    return flatten(units[:start]), flatten(units[start:])


def _plan_intra_turn(
    system: list[Msg], turns: list[Turn], keep_messages: int, budget: float, estimate: Estimator
) -> Plan:
    last = turns[-1]
    units = tool_units(last.body)
    first_kept = _tail_start(units, keep_messages)
    head = [last.request] if last.request is not None else []
    while first_kept < len(units) - 1 and (
        estimate(system + head + flatten(units[first_kept:])) > budget
    ):
        first_kept += 1
    to_summarize = flatten(turns[:-1]) + flatten(units[:first_kept])
    return Plan(
        system=system,
        to_summarize=to_summarize,
        to_keep=head + flatten(units[first_kept:]),
        mode="intra_turn" if to_summarize else "none",
        kept_turns=1,
    )


def plan_compression(
    context: Sequence[Msg],
    *,
    keep_recent: int,
    keep_recent_messages: int | None = None,
    window: int,
    target: float = DEFAULT_TARGET,
    estimate: Estimator,
    critical_tools: Collection[str] = (),
) -> Plan:
    """Partition ``context`` into system / to-summarize / to-keep (see module doc).
    ``critical_tools``: tool names whose results weigh as flagged critical ones."""
    system, conversation = split_system(context)
    if not conversation:
        return Plan(system=system)
    budget = window * target
    turns = split_turns(conversation)
    plan = _plan_turns(system, turns, keep_recent, budget, estimate, frozenset(critical_tools))
    if keep_recent_messages is None:
        return plan
    if plan.would_compress and estimate(plan.kept) <= budget:
        return plan
    intra = _plan_intra_turn(system, turns, max(1, keep_recent_messages), budget, estimate)
    if not intra.would_compress and keep_recent_messages > INTRA_TURN_RETRY_MESSAGES:
        intra = _plan_intra_turn(system, turns, INTRA_TURN_RETRY_MESSAGES, budget, estimate)
    return intra if intra.would_compress else plan


def would_compress(
    context: Sequence[Msg],
    *,
    keep_recent: int,
    keep_recent_messages: int | None = None,
    window: int,
    target: float = DEFAULT_TARGET,
    estimate: Estimator,
) -> bool:
    """Dry run: would :func:`plan_compression` summarize anything?"""
    return plan_compression(
        context,
        keep_recent=keep_recent,
        keep_recent_messages=keep_recent_messages,
        window=window,
        target=target,
        estimate=estimate,
    ).would_compress
