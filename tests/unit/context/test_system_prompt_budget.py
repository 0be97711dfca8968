"""The profile's system prompt is counted in the estimates the compression plans with,
so the kept region leaves room for it."""

from __future__ import annotations

from app.config import Settings
from app.domain.compression import Msg, plan_compression
from app.domain.context.loading import estimator_for
from app.domain.context.system_prompt import prompt_tokens

WINDOW = 4096
PROMPT = "Always answer as a careful senior engineer would. " * 40  # ~2,000 characters


def _turns(n: int) -> list[Msg]:
    body = " ".join(f"w{i}" for i in range(120))
    return [
        Msg(role=role, content=f"{role} {t}: {body}")
        for t in range(n)
        for role in ("user", "assistant")
    ]


def test_the_estimator_adds_the_prompt_to_every_prompt_it_prices() -> None:
    s = Settings()
    msgs = _turns(2)
    plain = estimator_for("m", WINDOW, s)
    with_prompt = estimator_for("m", WINDOW, s, PROMPT)
    extra = prompt_tokens(PROMPT, "m", WINDOW)
    assert extra > 300
    assert with_prompt(msgs) == plain(msgs) + extra


def test_a_prompt_longer_than_the_view_budget_is_priced_whole() -> None:
    # a stored message is priced (and sent) cut to WINDOW // 6 = 682 tokens; the prompt is
    # sent whole, so it is priced whole (issue 43 audit: PROMPT, ~2,000 characters, was
    # priced as its first ~1,200)
    part = PROMPT[:1000]
    short = prompt_tokens(part, "m", WINDOW)
    assert short < WINDOW // 6
    assert prompt_tokens(part * 4, "m", WINDOW) > 3.9 * short
    assert prompt_tokens(PROMPT, "m", WINDOW) > WINDOW // 6


def test_the_kept_region_leaves_room_for_the_prompt() -> None:
    s = Settings()
    msgs = _turns(12)

    def kept(system_prompt: str | None) -> int:
        estimate = estimator_for("m", WINDOW, s, system_prompt)
        plan = plan_compression(msgs, keep_recent=12, window=WINDOW, target=0.65, estimate=estimate)
        assert estimate(plan.kept) <= WINDOW * 0.65
        return len(plan.kept)

    assert kept(PROMPT) < kept(None)
