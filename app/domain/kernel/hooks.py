"""What happens to messages once compression demoted them out of the LLM context.

Compression removes messages from the model's window; it must not lose them. Every
compression (summary or hard truncate, on every trigger) hands the exact demoted
messages — as :class:`Msg` with their sequence numbers and ``created_at`` — together with
the summary's KEYS to each registered hook. Each app has its own registry
(``Runtime.demotion_hooks``, built at start-up by ``app/asgi/lifespan.py``); the raw-history indexer
(``app.domain.raw_history.hooks.raw_history_hook``) is registered there when
``MEMORY_SEARCH_ENABLED`` is on. ``demotion_hooks`` below is the empty default used when a
service is built without an app.

A hook runs inside the compression's transaction, in a SAVEPOINT of its own: when it
raises, its writes are rolled back, the failure is logged (``compressor.hook_failed``)
and the compression is committed all the same. That transaction holds the session's row
lock, so a hook makes no model call there: a hook that needs one (the raw-history index
embeds the chunks it will write) also has a ``prepare`` step (:class:`PreparingHook`),
run by :meth:`DemotionHooks.prepare` before the lock, with no transaction open; what it
returns is handed to the hook as ``ready``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.domain.compression import Msg

__all__ = ["DemotionHook", "DemotionHooks", "PreparingHook", "Ready", "demotion_hooks"]

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


class PreparingHook(Protocol):
    """A hook with a step before the lock: ``prepare`` (model calls; database reads on
    short sessions of `factory`, none held across a model call), then the call under the
    lock with what ``prepare`` returned (None when it failed or did not run)."""

    async def prepare(
        self,
        factory: async_sessionmaker[AsyncSession],
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
    ) -> Any: ...

    async def __call__(
        self,
        db: AsyncSession,
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
        ready: Any = None,
    ) -> None: ...


#: What the hooks' ``prepare`` steps returned, by hook.
Ready = dict[int, Any]


def _name(hook: object) -> str:
    return getattr(hook, "__qualname__", type(hook).__name__)


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

    async def prepare(
        self,
        factory: async_sessionmaker[AsyncSession],
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
    ) -> Ready:
        """The ``prepare`` step of every hook that has one, before the compression locks
        the session (no transaction open); a failure is logged and leaves that hook's
        ``ready`` None."""
        ready: Ready = {}
        if not demoted:
            return ready
        for hook in list(self._hooks):
            prepare = getattr(hook, "prepare", None)
            if prepare is None:
                continue
            try:
                ready[id(hook)] = await prepare(factory, user_id, session_id, demoted, keys)
            except Exception as exc:
                _hook_failed("compressor.hook_prepare_failed", session_id, hook, exc)
        return ready

    async def run(
        self,
        db: AsyncSession,
        user_id: str,
        session_id: uuid.UUID,
        demoted: Sequence[Msg],
        keys: Sequence[str],
        ready: Ready | None = None,
    ) -> int:
        """Run every hook (a preparing hook with what its ``prepare`` returned); returns
        how many failed (each failure is logged, never raised)."""
        failed = 0
        if not demoted:
            return 0
        for hook in list(self._hooks):
            try:
                async with db.begin_nested():
                    if hasattr(hook, "prepare"):
                        got = (ready or {}).get(id(hook))
                        await hook(db, user_id, session_id, demoted, keys, got)  # type: ignore[call-arg]
                    else:
                        await hook(db, user_id, session_id, demoted, keys)
            except Exception as exc:
                failed += 1
                _hook_failed("compressor.hook_failed", session_id, hook, exc)
        return failed


def _hook_failed(event: str, session_id: uuid.UUID, hook: object, exc: Exception) -> None:
    log.warning(
        event,
        session_id=str(session_id),
        hook=_name(hook),
        error_type=type(exc).__name__,
        error=str(exc)[:300],
    )


# The application's registry (no hooks until another domain registers one).
demotion_hooks = DemotionHooks()
