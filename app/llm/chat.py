"""Chat requests and replies: the gateway's checks of the messages, options, result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ollama
import pydantic

from app.llm.errors import LLMRequestError


@dataclass(frozen=True, slots=True)
class ChatResult:
    content: str
    prompt_eval_count: int
    eval_count: int
    model: str
    done_reason: str | None = None
    thinking: str | None = None


def validate_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    """LLMRequestError for a message Ollama would reject. Checked up front: a pydantic
    error *inside* the retry loop means a malformed response (retried), so bad input
    must be caught here instead."""
    for message in messages:
        try:
            ollama.Message.model_validate(dict(message))
        except (pydantic.ValidationError, TypeError, ValueError) as exc:
            raise LLMRequestError(
                f"chat: invalid message: {exc}", operation="chat", cause=exc
            ) from exc


def chat_options(
    options: Mapping[str, Any] | None, temperature: float | None, max_tokens: int | None
) -> dict[str, Any]:
    """Ollama's `options`: the caller's, with `temperature` and `num_predict` when given."""
    opts: dict[str, Any] = dict(options or {})
    if temperature is not None:
        opts["temperature"] = temperature
    if max_tokens is not None:
        opts["num_predict"] = max_tokens
    return opts


def chat_result(resp: ollama.ChatResponse, model: str) -> ChatResult:
    """The reply as a ChatResult (`model`: the one asked, when the reply names none)."""
    return ChatResult(
        content=resp.message.content or "",
        prompt_eval_count=resp.prompt_eval_count or 0,
        eval_count=resp.eval_count or 0,
        model=resp.model or model,
        done_reason=resp.done_reason,
        thinking=resp.message.thinking,
    )


@dataclass(frozen=True, slots=True)
class ChatChunk:
    """One piece of a streamed reply: text and thinking deltas, the tool calls the model
    asked for (each ``{"name", "arguments"}``), the prompt size on the last piece."""

    content: str = ""
    thinking: str = ""
    tool_calls: tuple[dict[str, Any], ...] = ()
    done: bool = False
    prompt_eval_count: int = 0
    eval_count: int = 0
    model: str = ""
    done_reason: str | None = None


def chat_chunk(resp: ollama.ChatResponse, model: str) -> ChatChunk:
    calls = tuple(
        {"name": c.function.name, "arguments": dict(c.function.arguments or {})}
        for c in resp.message.tool_calls or ()
    )
    return ChatChunk(
        content=resp.message.content or "",
        thinking=resp.message.thinking or "",
        tool_calls=calls,
        done=bool(resp.done),
        prompt_eval_count=resp.prompt_eval_count or 0,
        eval_count=resp.eval_count or 0,
        model=resp.model or model,
        done_reason=resp.done_reason,
    )
