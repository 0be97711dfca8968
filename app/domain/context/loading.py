"""The stored LLM context of a session as the compressor and the triggers read it: the
rows flagged ``is_context`` that reach the model, in layout order, with their
:class:`Msg`; and the calibrated estimator that prices them."""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import Message
from app.domain.compression import Estimator, Msg, calibration_for, estimate_tokens
from app.domain.context.system_prompt import prompt_tokens
from app.domain.files.images import context_view
from app.domain.kernel.access import reaches_llm
from app.domain.kernel.layout import order_context
from app.domain.sessions.message_repository import MessageRepository

__all__ = ["LoadedContext", "estimator_for", "load_context", "msg_from_row"]


def _decode_images(images: list[str] | None) -> list[bytes] | None:
    if not images:
        return None
    out = []
    for img in images:
        try:
            out.append(base64.b64decode(img))
        except (binascii.Error, ValueError, TypeError):
            continue  # validated on append; an unreadable one is priced by the fallback
    return out or None


def msg_from_row(row: Message) -> Msg:
    # As the LLM receives it: a pasted-image notice appended, only the admitted images.
    content, images = context_view(row.content or "", row.images, row.message_metadata)
    return Msg(
        role=row.role,
        content=content,
        sequence_number=row.sequence_number,
        is_context=row.is_context,
        is_display=row.is_display,
        is_summary=row.is_summary,
        is_compression=row.is_compression,
        is_compression_critical=row.is_compression_critical,
        is_plan=row.is_plan,
        tool_calls=row.tool_calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
        images=_decode_images(images),
        metadata=dict(row.message_metadata or {}),
        created_at=row.created_at,
    )


@dataclass
class LoadedContext:
    """The LLM context of a session: stored rows and their :class:`Msg`, in order.

    ``strays`` are rows flagged is_context that never reach the model (stored system
    records outside the allowlist); compression demotes them with the history so they
    can be archived.
    """

    rows: list[Message]
    msgs: list[Msg]
    strays: list[int] = field(default_factory=list)


async def load_context(db: AsyncSession, user_id: str, session_id: uuid.UUID) -> LoadedContext:
    """The session's stored context (`user_id`: the session's, its tenant key)."""
    rows = await MessageRepository(db).context_messages(user_id, session_id)
    visible, strays = [], []
    for r in rows:
        if reaches_llm(r.role, r.is_context, r.message_metadata):
            visible.append(r)
        else:
            strays.append(r.sequence_number)
    ordered = order_context(visible, lambda r: r.message_metadata)
    return LoadedContext(ordered, [msg_from_row(r) for r in ordered], strays)


def estimator_for(
    model: str,
    window: int,
    settings: Settings,
    system_prompt: str | None = None,
    *,
    user_id: str = "",
) -> Estimator:
    """The real-token estimator of ``model`` over the view the model gets, calibrated for
    the user ``user_id`` (the session's); with the profile's ``system_prompt``, which
    every prompt carries, counted in."""
    calib = calibration_for(model, user_id)
    fixed = prompt_tokens(system_prompt, model, window, user_id=user_id)

    def estimate(messages: list[Msg]) -> int:
        return fixed + estimate_tokens(
            messages,
            calib,
            window=window,
            message_budget=settings.context_message_token_budget,
            image_fallback=settings.context_image_tokens,
        )

    return estimate
