"""The tools of one turn: the profile's built-in tools (the registry, ``tools.py``), run
server-side, and the client's own tools, handed back to it (``requires_action``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, cast

import anyio.to_thread
import ollama
import structlog
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.agents.prompt import CARD_KEY
from app.domain.agents.stream import ToolCall, ToolResult, TurnEvent
from app.domain.agents.tool_types import ToolResult as ToolOutput
from app.domain.agents.tools import (
    BUILTIN_TOOLS,
    ToolContext,
    ollama_tool_defs,
    run_tool,
    texts_ahead,
)
from app.domain.compression import image_tokens
from app.domain.files.image_view import read_session_image
from app.domain.files.notice import image_view_refusal
from app.domain.kernel.messages import MessageIn, MessageOut
from app.domain.kernel.principal import Principal
from app.domain.kernel.profiles import Profile
from app.domain.kernel.runtime import Runtime
from app.lib.errors import AppError, Unprocessable
from app.llm.gateway import LLMError, LLMGateway
from app.llm.query_embeddings import QueryEmbeddings

log = structlog.get_logger("app.agents.turns")

__all__ = ["VIEWED_KEY", "Toolbox", "client_tool_names"]

#: Metadata of a tool message whose images went to the next model call: their paths,
#: read again when a resume makes that call (the stored history keeps no image bytes).
VIEWED_KEY = "viewed_images"


def client_tool_names(defs: Sequence[dict[str, Any]]) -> list[str]:
    """The names of the client's tool definitions (Ollama's / OpenAI's shape); 422 for a
    definition without one."""
    names = []
    for i, d in enumerate(defs):
        fn = d.get("function") if isinstance(d.get("function"), dict) else None
        name = fn.get("name") if fn else None
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise Unprocessable(f"tools[{i}].function.name: a name of 1-100 characters")
        names.append(name)
    return names


class Toolbox:
    def __init__(
        self,
        runtime: Runtime,
        profile_tools: Sequence[str] | None,
        client_tools: Sequence[dict[str, Any]],
    ) -> None:
        self.runtime, self.settings = runtime, runtime.settings
        known = set(BUILTIN_TOOLS)
        wanted = list(known) if profile_tools is None else list(profile_tools)
        unknown = [n for n in wanted if n not in known]
        if unknown:
            log.warning("turn.profile_tools_unknown", tools=unknown)
        self.builtin = sorted(n for n in wanted if n in known)
        clash = set(client_tool_names(client_tools)) & set(self.builtin)
        if clash:
            raise Unprocessable(f"tools: {sorted(clash)} are built-in tools of this profile")
        self.client_tools = list(client_tools)
        # Images the last round's tools handed the model (`image_view`): (the tool
        # message's content, the images), attached to the next model call only.
        self.viewed: list[tuple[str, list[ollama.Image]]] = []
        #: Tokens the next model call still has for such images (`image_budget`, set by
        #: the turn loop before each round's tools run).
        self.image_room = 0

    @classmethod
    def for_profile(
        cls, runtime: Runtime, profile: Profile, client: Sequence[dict[str, Any]]
    ) -> Toolbox:
        return cls(runtime, profile.tools, client)

    def definitions(self) -> list[dict[str, Any]]:
        return [*ollama_tool_defs(self.builtin), *self.client_tools]

    async def embed_ahead(
        self,
        principal: Principal,
        session_id: uuid.UUID,
        calls: Sequence[tuple[str, str, dict[str, Any]]],
    ) -> LLMGateway | None:
        """The round's embeddings, made before its transaction opens (with no connection
        held: a slow embedder then delays this turn only, not the pool): what each
        built-in call says it will embed (`ToolSpec.ahead`). The gateway handed to those
        calls' run — sealed: it answers from what was made here and never calls the
        model (a failure here is remembered: the calls degrade as they do without an
        embedder)."""
        if self.runtime.llm is None:
            return None
        texts: list[str] = []
        for _, name, args in calls:
            if name in self.builtin:
                texts += await texts_ahead(name, self.runtime, principal, session_id, args)
        cached = QueryEmbeddings(self.runtime.llm)
        if texts:
            try:
                await cached.embed(texts)
            except LLMError:
                pass
        return cast(LLMGateway, cached.seal())

    async def run_calls(
        self,
        db: AsyncSession,
        principal: Principal,
        session_id: uuid.UUID,
        calls: Sequence[tuple[str, str, dict[str, Any]]],
        emit: Callable[[TurnEvent], None],
        embedded: LLMGateway | None = None,
    ) -> list[MessageIn]:
        """Run the built-in calls (each in a savepoint: a failing one cannot spoil the
        round's transaction); the results as tool messages. `embedded`: the gateway of
        `embed_ahead`, handed to the calls that embed."""
        ctx = ToolContext(db, self.runtime, principal, session_id)
        ahead = ToolContext(db, self.runtime, principal, session_id, llm=embedded)
        out = []
        self.viewed = []
        for cid, name, args in calls:
            builtin = name in self.builtin
            emit(ToolCall(id=cid, name=name, arguments=args, builtin=builtin))
            if not builtin:
                continue
            own = ahead if embedded is not None and BUILTIN_TOOLS[name].ahead else ctx
            result = self._priced(await self._run_one(db, own, name, args))
            text, is_error = result.text, result.is_error
            emit(ToolResult(id=cid, name=name, content=text, is_error=is_error))
            content = text[: self.settings.message_max_chars]
            meta: dict[str, Any] = {"is_error": True} if is_error else {}
            if name == "content_publish" and not is_error and result.data:
                # the card the console's chat draws (type, content_type, size, url, name)
                meta[CARD_KEY] = {k: v for k, v in result.data.items() if k != "text"}
            if result.images:
                images = [ollama.Image(value=i.data) for i in result.images]
                self.viewed.append((content, images))
                path = (result.data or {}).get("path")
                meta = {**meta, VIEWED_KEY: [path]} if isinstance(path, str) else meta
            out.append(
                MessageIn(role="tool", content=content, tool_call_id=cid, name=name, metadata=meta)
            )
        return out

    def _priced(self, result: ToolOutput) -> ToolOutput:
        """`result` when its images fit into what is left of `image_room` (then taken
        from it), else a tool error saying so: no resize path, so never sent over."""
        if not result.images:
            return result
        fallback = self.settings.context_image_tokens
        cost = sum(image_tokens(i.data, fallback) for i in result.images)
        if cost <= self.image_room:
            self.image_room -= cost
            return result
        path = str((result.data or {}).get("path") or "the image")
        log.info("turn.image_view_refused", path=path, tokens=cost, room=self.image_room)
        return ToolOutput(image_view_refusal(path, cost, self.image_room), None, True)

    async def reload_viewed(
        self, session_id: uuid.UUID, results: Sequence[MessageOut], room: int
    ) -> None:
        """A resume: the images the round's built-in calls handed the model (`results`,
        their tool messages), read again — the model call that was to carry them never
        ran, the client's tools came first. Priced again (`room`): the client's results
        may have filled the window since; one that no longer fits, or is gone, is left
        out (logged)."""
        self.viewed, self.image_room = [], room
        fallback = self.settings.context_image_tokens
        for m in results:
            for path in m.metadata.get(VIEWED_KEY) or ():
                try:
                    image = await anyio.to_thread.run_sync(
                        read_session_image, self.settings, session_id, str(path)
                    )
                except (AppError, OSError) as exc:
                    log.warning("turn.viewed_image_lost", path=str(path), error=str(exc))
                    continue
                cost = image_tokens(image.data, fallback)
                if cost > self.image_room:
                    log.info("turn.viewed_image_dropped", path=str(path), tokens=cost)
                    continue
                self.image_room -= cost
                self.viewed.append((m.content, [ollama.Image(value=image.data)]))

    def with_viewed_images(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` (Ollama's shape) with the images the last round's tools handed the
        model on their tool messages (the newest matching one each); once only."""
        for content, images in self.viewed:
            for i in range(len(messages) - 1, -1, -1):
                m = messages[i]
                if m["role"] == "tool" and m["content"] == content:
                    messages[i] = {**m, "images": [*(m.get("images") or ()), *images]}
                    break
        self.viewed = []
        return messages

    async def _run_one(
        self, db: AsyncSession, ctx: ToolContext, name: str, args: dict[str, Any]
    ) -> ToolOutput:
        try:
            async with db.begin_nested():
                result = await run_tool(name, ctx, args)
        except SQLAlchemyError:
            raise  # the database failing ends the round (its transaction rolls back)
        except Exception as exc:  # the model sees the failure and may try otherwise
            log.warning("turn.tool_failed", tool=name, error=type(exc).__name__)
            return ToolOutput(f"error: the tool {name} failed ({type(exc).__name__})", None, True)
        return result
