from __future__ import annotations

from litestar import Controller, post

from app.config import Settings
from app.domain.error_memory.deps import DEPENDENCIES
from app.domain.error_memory.schemas import (
    ErrorHistoryIn,
    ErrorHistoryOut,
    WriteErrorIn,
    WriteErrorOut,
)
from app.domain.error_memory.services import ErrorMemoryService
from app.domain.error_memory.tool import error_history_embeds, run_error_history, run_write_error
from app.domain.kernel.principal import Principal
from app.domain.kernel.runtime import Runtime
from app.llm.query_embeddings import embedded_ahead


class ErrorMemoryController(Controller):
    tags = ["tools"]
    dependencies = DEPENDENCIES

    @post("/tools/write_error", status_code=200)
    async def write_error(
        self,
        data: WriteErrorIn,
        principal: Principal,
        errors: ErrorMemoryService,
        settings: Settings,
    ) -> WriteErrorOut:
        """Record a resolved tool error and its fix (the caller's, across sessions)."""
        return await run_write_error(errors, settings, principal.id, data)

    @post("/tools/error_history", status_code=200)
    async def error_history(
        self,
        data: ErrorHistoryIn,
        principal: Principal,
        errors: ErrorMemoryService,
        runtime: Runtime,
    ) -> ErrorHistoryOut:
        """Past errors like this one and how they were fixed (text + vector search)."""
        # the query's vector first: the search's text read comes before its vector read,
        # and the request's session holds its connection from its first statement
        errors.embed_through(await embedded_ahead(runtime.llm, error_history_embeds(data)))
        return await run_error_history(errors, principal.id, data)
