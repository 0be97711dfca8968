"""What happens to messages once compression demoted them out of the LLM context.

Compression removes messages from the model's window; it must not lose them. Every
compression (summary or hard truncate, on every trigger) hands the exact demoted
messages — as :class:`Msg` with their sequence numbers and ``created_at`` — together with
the summary's KEYS to each registered hook. Each app has its own registry
(``Runtime.demotion_hooks``, built at start-up by ``app/asgi.py``); the raw-history indexer
(``app.domain.raw_history.hooks.raw_history_hook``) is registered there when
``MEMORY_SEARCH_ENABLED`` is on. ``demotion_hooks`` below is the empty default used when a
service is built without an app.

A hook runs inside the compression's transaction, in a SAVEPOINT of its own: when it
raises, its writes are rolled back, the failure is logged (``compressor.hook_failed``)
and the compression is committed all the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compression import Msg

__all__ = ["DemotionHook", "DemotionHooks", "demotion_hooks"]

log = structlog.get_logger()


class DemotionHook(Protocol):
    async def __call__(
        self,
        db: AsyncSession,
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
    ) -> None: ...


class DemotionHooks:
    """An ordered list of hooks; the default registry starts empty (a no-op)."""

    def __init__(self) -> None:
        self._hooks: list[DemotionHook] = []

    def register(self, hook: DemotionHook) -> DemotionHook:
        if hook not in self._hooks:
            self._hooks.append(hook)
        return hook

    def unregister(self, hook: DemotionHook) -> None:
        if hook in self._hooks:
            self._hooks.remove(hook)

    def __len__(self) -> int:
        return len(self._hooks)

    async def run(
        self,
        db: AsyncSession,
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
    ) -> int:
        """Run every hook; returns how many failed (each failure is logged, never raised)."""
        failed = 0
        if not demoted:
            return 0
        for hook in list(self._hooks):
            try:
                async with db.begin_nested():
                    await hook(db, user_id, session_id, demoted, keys)
            except Exception as exc:
                failed += 1
                log.warning(
                    "compressor.hook_failed",
                    session_id=str(session_id),
                    hook=getattr(hook, "__qualname__", type(hook).__name__),
                    error_type=type(exc).__name__,
                    error=str(exc)[:300],
                )
        return failed


# The application's registry (no hooks until another domain registers one).
demotion_hooks = DemotionHooks()
