"""HTTP: POST /memory/forget (the caller's), POST /admin/users/{id}/forget (an admin's),
POST /tools/memory (the memory tool call verbatim; its `forget` may take a `text`), and
the status of a forget that answered 202 (GET …/forget/jobs/{job_id})."""

from __future__ import annotations

import uuid

from litestar import Controller, Response, get, post

from app.domain.auth.controllers import require_admin
from app.domain.facts.schemas import MemoryToolCall, MemoryToolResult
from app.domain.facts.services import FactService
from app.domain.forget.deps import DEPENDENCIES
from app.domain.forget.schemas import ForgetIn, ForgetJobOut, ForgetOut
from app.domain.forget.services import ForgetService
from app.domain.forget.tool import run_memory_tool_with_forget
from app.domain.kernel.principal import Principal


def _answer(out: ForgetOut | ForgetJobOut) -> Response[ForgetOut | ForgetJobOut]:
    """200 with the counts when the forget ended in time; else 202 with its job."""
    return Response(out, status_code=200 if isinstance(out, ForgetOut) else 202)


class ForgetController(Controller):
    path = "/memory"
    tags = ["memory"]
    dependencies = DEPENDENCIES

    @post("/forget", status_code=200)
    async def forget_text(
        self, data: ForgetIn, principal: Principal, forget: ForgetService
    ) -> Response[ForgetOut | ForgetJobOut]:
        return _answer(await forget.forget(principal.id, data.text, dry_run=data.dry_run))

    @get("/forget/jobs/{job_id:uuid}")
    async def forget_job(
        self, job_id: uuid.UUID, principal: Principal, forget: ForgetService
    ) -> ForgetJobOut:
        return await forget.job(principal.id, job_id)


class AdminForgetController(Controller):
    path = "/admin/users"
    tags = ["admin"]
    dependencies = DEPENDENCIES

    @post("/{user_id:str}/forget", status_code=200)
    async def forget_for_user(
        self, user_id: str, data: ForgetIn, principal: Principal, forget: ForgetService
    ) -> Response[ForgetOut | ForgetJobOut]:
        require_admin(principal)
        return _answer(
            await forget.forget_for_admin(
                user_id, data.text, dry_run=data.dry_run, actor=principal.id
            )
        )

    @get("/{user_id:str}/forget/jobs/{job_id:uuid}")
    async def forget_job_of_user(
        self, user_id: str, job_id: uuid.UUID, principal: Principal, forget: ForgetService
    ) -> ForgetJobOut:
        require_admin(principal)
        return await forget.job(user_id, job_id)


class MemoryToolController(Controller):
    path = "/tools"
    tags = ["tools"]
    dependencies = DEPENDENCIES

    @post("/memory", status_code=200)
    async def memory_tool(
        self,
        data: MemoryToolCall,
        principal: Principal,
        facts: FactService,
        forget: ForgetService,
    ) -> MemoryToolResult:
        return await run_memory_tool_with_forget(facts, forget, principal.id, data)
