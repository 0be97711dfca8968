"""What the stored context costs and what the model is sent of it, for the triggers of
:mod:`app.domain.context.services`.

* :meth:`Pricing.tokens`: the real-token baseline (``prompt_eval_count`` of a prompt that
  held the first ``count`` messages, same model) plus the calibrated estimate of the rest;
* :meth:`Pricing.over_threshold` / :meth:`Pricing.can_compress`: the compression trigger;
* :meth:`Pricing.view`: the context as the model gets it (per-message view truncation);
* :meth:`Pricing.calibrate`: the post-turn record of the real prompt size.

Every price is the session's user's: the calibration is per user and model
(:mod:`app.domain.compression.calibration`), so ``user_id`` is the session's (its
tenant key), not the viewer's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec
import structlog

from app.config import Settings
from app.domain.compression import (
    Msg,
    calibration_for,
    context_chars,
    context_limit,
    image_tokens,
    images_tokens,
    is_plausible_count,
    is_truncated_prompt,
    real_baseline_estimate,
    record_real_baseline,
    truncate_for_view,
    view_budget_tokens,
    would_compress,
)
from app.domain.context.injection import INJECTED_CHARS_KEY
from app.domain.context.loading import LoadedContext, estimator_for
from app.domain.context.system_prompt import prompt_tokens
from app.domain.context.writer import BASELINE_KEY, TRUNCATED_KEY
from app.domain.files.images import with_context_note
from app.domain.files.notice import admitted_images, image_budget
from app.domain.kernel.events import UsageIn
from app.domain.kernel.messages import MessageOut
from app.domain.kernel.profiles import Profile
from app.domain.sessions.services import message_out

log = structlog.get_logger("app.context.pricing")

__all__ = ["Calibration", "Pricing", "baseline_of"]


def _prompt_count(msgs: list[Msg]) -> int:
    """How many context messages the prompt of the last model reply held."""
    end = len(msgs)
    while end and msgs[end - 1].role == "tool":
        end -= 1
    if end and msgs[end - 1].role == "assistant":
        return end - 1
    return len(msgs)


def baseline_of(metadata: Mapping[str, Any] | None, model: str) -> tuple[int | None, int]:
    """``(tokens, count)`` of the session's real-token baseline for ``model``."""
    raw = (metadata or {}).get(BASELINE_KEY)
    if not isinstance(raw, dict) or raw.get("model") != model:
        return None, 0
    try:
        return int(raw["tokens"]), int(raw["count"])
    except (KeyError, TypeError, ValueError):
        return None, 0


@dataclass
class Calibration:
    """The post-turn outcome: the session metadata to set and drop; ``truncated`` when
    the runtime's prompt was silently cut (compress unconditionally)."""

    truncated: bool = False
    set_metadata: dict[str, Any] = field(default_factory=dict)
    drop_metadata: list[str] = field(default_factory=list)


class Pricing:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def tokens(
        self,
        msgs: list[Msg],
        *,
        user_id: str,
        model: str,
        window: int,
        metadata: Mapping[str, Any] | None,
        extra: Msg | None = None,
        system_prompt: str | None = None,
    ) -> int:
        """With the profile's ``system_prompt`` counted in, unless the real baseline
        (a prompt that carried it) already holds it."""
        tokens, count = baseline_of(metadata, model)
        msgs = msgs + ([extra] if extra is not None else [])
        measured = tokens is not None and tokens > 0 and 0 < count <= len(msgs)
        fixed = 0 if measured else prompt_tokens(system_prompt, model, window, user_id=user_id)
        return fixed + real_baseline_estimate(
            msgs,
            baseline_tokens=tokens,
            baseline_count=count,
            calib=calibration_for(model, user_id),
            window=window,
            message_budget=self.settings.context_message_token_budget,
            image_fallback=self.settings.context_image_tokens,
        )

    def admitted_incoming(
        self,
        msgs: list[Msg],
        incoming: Msg | None,
        *,
        user_id: str,
        model: str,
        window: int,
        metadata: Mapping[str, Any] | None,
        system_prompt: str | None = None,
    ) -> Msg | None:
        """The incoming message with only the pasted images the image budget admits
        (``0.8 × window`` − the context with the message's text): the others never reach
        the model — its stored copy names them for ``image_view`` — so they are not
        priced either."""
        if incoming is None or not incoming.images:
            return incoming
        text_only = replace(incoming, images=None)
        used = self.tokens(
            msgs,
            user_id=user_id,
            model=model,
            window=window,
            metadata=metadata,
            extra=text_only,
            system_prompt=system_prompt,
        )
        costs = [image_tokens(i, self.settings.context_image_tokens) for i in incoming.images]
        k = admitted_images(costs, image_budget(window, used))
        return replace(incoming, images=incoming.images[:k] or None)

    def can_compress(
        self,
        msgs: list[Msg],
        profile: Profile,
        model: str,
        keep_messages: int | None,
        *,
        user_id: str,
    ) -> bool:
        window = profile.context_window
        estimate = estimator_for(
            model, window, self.settings, profile.system_prompt, user_id=user_id
        )
        return would_compress(
            msgs,
            keep_recent=profile.keep_recent,
            keep_recent_messages=keep_messages,
            window=window,
            target=self.settings.context_compression_target,
            estimate=estimate,
        )

    def over_threshold(self, tokens: int, window: int) -> bool:
        """At ``window × threshold`` — or earlier, when the prompt would not pass the size
        check anyway (small windows: window − reserve can be below 90 %)."""
        trigger = min(
            window * self.settings.context_compression_threshold,
            context_limit(window, self.settings.output_reserve_tokens) + 1,
        )
        return tokens >= trigger

    def view(
        self, loaded: LoadedContext, model: str, window: int, *, user_id: str
    ) -> list[MessageOut]:
        calib = calibration_for(model, user_id)
        budget = view_budget_tokens(window, self.settings.context_message_token_budget)
        out = []
        for row, msg in zip(loaded.rows, loaded.msgs, strict=True):
            item = with_context_note(message_out(row))
            view = truncate_for_view(msg, budget, calib)
            if view is not msg:
                item = msgspec.structs.replace(item, content=view.content, metadata=view.metadata)
            out.append(item)
        return out

    def calibrate(
        self,
        msgs: list[Msg],
        usage: UsageIn,
        window: int,
        metadata: dict[str, Any],
        system_prompt: str | None = None,
        *,
        user_id: str,
    ) -> Calibration:
        """Record the real size of the prompt that produced the reply in the user's
        calibration, unless it was silently truncated or cannot be a count of that
        prompt; a new baseline is also written into ``metadata``.

        The client reports the count; the characters it is fitted against are Navi's own
        count of the prompt it handed out (``usage.sent_chars`` is not used), and a
        prompt Navi knows carried images never enters the fit, whatever
        ``usage.had_images`` says. A count above :func:`is_plausible_count` (more tokens
        than the prompt's characters could make, plus half the window) is ignored —
        neither recorded nor kept as the baseline (log ``context.implausible_prompt_count``).
        """
        model = usage.model
        # The reported prompt produced the reply that closes this append (an assistant
        # message, maybe followed by its tool calls' results): it held every context
        # message before that reply.
        count = _prompt_count(msgs)
        if usage.prompt_eval_count <= 0 or count <= 0:
            return Calibration()
        prompt = msgs[:count]
        calib = calibration_for(model, user_id)
        budget = view_budget_tokens(window, self.settings.context_message_token_budget)
        our_chars = context_chars(truncate_for_view(m, budget, calib) for m in prompt)
        # the memory notes prepare injected were sent with that prompt, not stored
        our_chars += int(metadata.get(INJECTED_CHARS_KEY) or 0)
        our_chars += len(system_prompt or "")  # the profile's prompt, sent first
        images = images_tokens(prompt, self.settings.context_image_tokens)
        if not is_plausible_count(usage.prompt_eval_count, our_chars, window, images):
            log.info(
                "context.implausible_prompt_count",
                model=model,
                prompt_eval_count=usage.prompt_eval_count,
                chars=our_chars,
                window=window,
                hint="more tokens than the prompt could make: not recorded, not a baseline",
            )
            return Calibration()
        sent_tokens = usage.sent_tokens or self.tokens(
            prompt,
            user_id=user_id,
            model=model,
            window=window,
            metadata=metadata,
            system_prompt=system_prompt,
        )
        honest = record_real_baseline(
            model,
            chars=our_chars,
            prompt_eval_count=usage.prompt_eval_count,
            sent_tokens=sent_tokens,
            had_images=bool(usage.had_images) or images > 0,
            user_id=user_id,
        )
        if not honest:
            if is_truncated_prompt(usage.prompt_eval_count, sent_tokens, window):
                return Calibration(truncated=True, set_metadata={TRUNCATED_KEY: True})
            log.info(
                "context.short_prompt_count",
                model=model,
                prompt_eval_count=usage.prompt_eval_count,
                sent_tokens=sent_tokens,
                hint="far below a cut prompt's size: not recorded, not taken for a truncation",
            )
            return Calibration()
        baseline = {"tokens": usage.prompt_eval_count, "count": count, "model": model}
        metadata[BASELINE_KEY] = baseline
        return Calibration(set_metadata={BASELINE_KEY: baseline}, drop_metadata=[TRUNCATED_KEY])
