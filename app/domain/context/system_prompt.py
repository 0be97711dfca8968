"""The profile's system prompt: built fresh from the profile on every prepare (and so on
every model call of a turn), never stored in the session, counted in every token
estimate of the context (the compression leaves room for it)."""

from __future__ import annotations

from app.domain.compression import Msg, added_tokens, calibration_for
from app.domain.context.injection import system_note
from app.domain.kernel.messages import MessageOut
from app.domain.kernel.profiles import Profile

__all__ = ["SYSTEM_PROMPT_SOURCE", "prompt_note", "prompt_tokens"]

#: metadata["source"] of the prompt's message in a prepared context.
SYSTEM_PROMPT_SOURCE = "profile_system_prompt"


def prompt_note(profile: Profile) -> MessageOut | None:
    """The prompt as the first message of a context (not stored: sequence_number −1)."""
    if not profile.system_prompt:
        return None
    return system_note(profile.system_prompt, SYSTEM_PROMPT_SOURCE, profile_id=profile.id)


def prompt_tokens(system_prompt: str | None, model: str, window: int, *, user_id: str = "") -> int:
    """The tokens the prompt adds to a prompt priced with it (0 without one): at the
    marginal rate of the user's calibration (``user_id``: the session's), the prompt's
    overhead being in the estimate of the rest. Priced whole: the prompt is sent whole
    (:func:`prompt_note`), never cut to the per-message view budget (``window // 6``) the
    stored messages are."""
    if not system_prompt:
        return 0
    msg = Msg(role="system", content=system_prompt)
    whole = len(system_prompt) + 1  # a budget in tokens no prompt of that many characters exceeds
    calib = calibration_for(model, user_id)
    return added_tokens([msg], calib, window=window, message_budget=whole)
