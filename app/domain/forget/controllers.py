"""HTTP: POST /memory/forget (the caller's), POST /admin/users/{id}/forget (an admin's),
POST /tools/memory (the memory tool call verbatim; its `forget` may take a `text`)."""

from __future__ import annotations

from litestar import Controller, post

from app.domain.auth.controllers import require_admin
from app.domain.facts.schemas import MemoryToolCall, MemoryToolResult
from app.domain.facts.services import FactService
from app.domain.forget.deps import DEPENDENCIES
from app.domain.forget.schemas import ForgetIn, ForgetOut
from app.domain.forget.services import ForgetService
from app.domain.forget.tool import run_memory_tool_with_forget
from app.domain.kernel.principal import Principal


class ForgetController(Controller):
    path = "/memory"
    tags = ["memory"]
    dependencies = DEPENDENCIES

    @post("/forget", status_code=200)
    async def forget_text(
        self, data: ForgetIn, principal: Principal, forget: ForgetService
    ) -> ForgetOut:
        return await forget.forget(principal.id, data.text, dry_run=data.dry_run)


class AdminForgetController(Controller):
    path = "/admin/users"
    tags = ["admin"]
    dependencies = DEPENDENCIES

    @post("/{user_id:str}/forget", status_code=200)
    async def forget_for_user(
        self, user_id: str, data: ForgetIn, principal: Principal, forget: ForgetService
    ) -> ForgetOut:
        require_admin(principal)
        return await forget.forget_for_admin(
            user_id, data.text, dry_run=data.dry_run, actor=principal.id
        )


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
