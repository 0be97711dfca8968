"""Profiles: the per-profile window and compression overrides.

A session names its profile (``sessions.profile_id``). Each profile may set

* ``context_window`` — the model's window in tokens (default ``OLLAMA_NUM_CTX``);
* ``compression_keep_recent`` — recent turns kept verbatim (default ``CONTEXT_KEEP_RECENT``);
* ``compression_max_tokens`` — max output tokens of the summary
  (default ``CONTEXT_SUMMARY_MAX_TOKENS``);
* ``compression_prompt_file`` — a text file replacing the built-in summary prompt
  (a relative path is resolved against the profiles file's directory);
* ``model`` — the model the agent talks to with this profile: the key of the token
  calibration and the default model of the summary call (default ``OLLAMA_MODEL``);
* ``summary_model`` — a different Ollama model for the summary call;
* ``vision`` — the summary model reads images (base64 images are sent with the
  summary request); default false;
* ``context_mode`` — ``compress`` (default: the window is kept by compressing old turns
  into a summary) or ``rolling`` (the last ``max_history_messages`` messages plus the
  rolling summary kept by a periodic job; see docs/context-modes.md);
* ``max_history_messages`` — messages sent verbatim in ``rolling`` mode (default 16);
* ``reply_lang`` — language of the rolling summary's text, ``auto`` (default) = the
  conversation's;
* ``tools`` — the built-in tools the turn endpoint (``POST /sessions/{id}/turns``) offers
  the model, by name (default: all of them; ``[]`` = none);
* ``options`` — Ollama ``options`` of the turn's model calls (``temperature``, ``top_p``…;
  ``num_ctx`` defaults to ``context_window``);
* ``think`` — ask the turn's model for its reasoning (default: the model's own default);
* ``critical_tools`` — tool names whose results compression treats as critical, exactly
  like a message's ``is_compression_critical`` flag (default: none).
* ``system_prompt`` — the profile's system prompt (inline text), or ``system_prompt_file``
  (a file read at start-up, resolved like ``compression_prompt_file``): sent first on every
  model call of the turn endpoint and first in ``/prepare``'s context, never stored, so a
  profile switch takes effect at the next call (at most ``MAX_PROMPT_CHARS`` characters).
  A profile without one that offers ``memory_search`` gets the built-in memory usage
  guidance (``llm/prompts/memory_guidance.txt``) instead, unless
  ``MEMORY_GUIDANCE_ENABLED`` is off; a profile's own prompt replaces the guidance whole.

Built in are ``default`` (all defaults) and ``code`` (``compression_keep_recent=12``).
``NAVI_PROFILES_FILE`` points at a JSON object mapping profile ids to such objects; a
built-in id named there has its fields overridden one by one. A new session must name a
known profile (``POST /sessions`` answers 422 otherwise); a stored session whose profile
was since removed resolves to ``default``. The file is read and validated once, at start-up; any problem is
a :class:`ProfilesError` naming the file, the profile and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from app.config import Settings, SettingsError

__all__ = [
    "BUILTIN_PROFILES",
    "DEFAULT_PROFILE_ID",
    "PROMPTS_DIR",
    "Profile",
    "ProfileSpec",
    "Profiles",
    "ProfilesError",
    "load_profiles",
]

DEFAULT_PROFILE_ID = "default"
PROMPTS_DIR = Path(__file__).resolve().parents[2] / "llm" / "prompts"
MAX_PROMPT_CHARS = 20_000
MEMORY_SEARCH_TOOL = "memory_search"  # the tool the memory guidance is about


class ProfilesError(SettingsError):
    """The profiles file cannot be used; the message names the field at fault."""


ToolName = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


class ProfileSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One profile as written in the file: every field optional."""

    context_window: Annotated[int, msgspec.Meta(ge=256, le=10_000_000)] | None = None
    compression_keep_recent: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    compression_max_tokens: Annotated[int, msgspec.Meta(ge=16, le=1_000_000)] | None = None
    compression_prompt_file: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    summary_model: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    vision: bool | None = None
    context_mode: Literal["compress", "rolling"] | None = None
    max_history_messages: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    reply_lang: Annotated[str, msgspec.Meta(min_length=1, max_length=40)] | None = None
    tools: Annotated[list[ToolName], msgspec.Meta(max_length=100)] | None = None
    options: Annotated[dict[str, Any], msgspec.Meta(max_length=50)] | None = None
    think: bool | None = None
    critical_tools: Annotated[list[ToolName], msgspec.Meta(max_length=100)] | None = None
    system_prompt: (
        Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_PROMPT_CHARS)] | None
    ) = None
    system_prompt_file: Annotated[str, msgspec.Meta(min_length=1)] | None = None


BUILTIN_PROFILES: dict[str, ProfileSpec] = {
    DEFAULT_PROFILE_ID: ProfileSpec(),
    "code": ProfileSpec(compression_keep_recent=12),
}


@dataclass(frozen=True)
class Profile:
    """A profile resolved against the settings: every value concrete."""

    id: str
    context_window: int
    keep_recent: int
    summary_max_tokens: int
    summary_prompt: str
    model: str
    summary_model: str
    vision: bool
    context_mode: str = "compress"
    max_history_messages: int = 16
    reply_lang: str = "auto"
    tools: tuple[str, ...] | None = None  # None: every built-in tool
    options: dict[str, Any] | None = None
    think: bool | None = None
    critical_tools: tuple[str, ...] = ()  # their results count as is_compression_critical
    system_prompt: str | None = None  # sent first on every model call, never stored

    def model_options(self) -> dict[str, Any]:
        """The turn's Ollama options: the profile's, ``num_ctx`` = the window by default."""
        return {"num_ctx": self.context_window, **(self.options or {})}

    def mid_turn_keep_messages(self) -> int:
        """Messages kept verbatim by the intra-turn partition (mid-turn, post-turn)."""
        return max(12, self.keep_recent * 2)


ROLLING = "rolling"


class Profiles:
    """The resolved profiles; :meth:`get` falls back to ``default``."""

    def __init__(self, profiles: dict[str, Profile]) -> None:
        if DEFAULT_PROFILE_ID not in profiles:
            raise ValueError("the default profile is required")
        self._profiles = dict(profiles)
        default_rolling = self.get(None).context_mode == ROLLING
        self.rolling_marks: tuple[bool, list[str]] = (
            default_rolling,
            sorted(
                pid
                for pid, p in self._profiles.items()
                if (p.context_mode == ROLLING) != default_rolling
            ),
        )
        """Which profile ids are in rolling mode, as (all_but, ids): with `all_but` every
        id but `ids` (the default profile is rolling, so unknown ids are too), else only
        `ids`. The append marks a session for the rolling summary by it
        (`sessions.rolling_pending`)."""

    def get(self, profile_id: str | None) -> Profile:
        return self._profiles.get(profile_id or "", self._profiles[DEFAULT_PROFILE_ID])

    def ids(self) -> list[str]:
        return sorted(self._profiles)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._profiles


def default_summary_prompt() -> str:
    return (PROMPTS_DIR / "summary.txt").read_text(encoding="utf-8")


def memory_guidance() -> str:
    """The built-in system prompt: when to search memory, when not, what wins, when to
    forget (seed 000, "Memory usage guidelines")."""
    return (PROMPTS_DIR / "memory_guidance.txt").read_text(encoding="utf-8").strip()


def _default_system_prompt(spec: ProfileSpec, settings: Settings) -> str | None:
    """The system prompt of a profile that sets none: the memory guidance, when it is on
    and the profile offers ``memory_search`` (every tool when ``tools`` is unset)."""
    offers_search = spec.tools is None or MEMORY_SEARCH_TOOL in spec.tools
    return memory_guidance() if settings.memory_guidance_enabled and offers_search else None


def _merge(base: ProfileSpec, over: ProfileSpec) -> ProfileSpec:
    values = {f: getattr(base, f) for f in ProfileSpec.__struct_fields__}
    values.update(
        {f: getattr(over, f) for f in ProfileSpec.__struct_fields__ if getattr(over, f) is not None}
    )
    return ProfileSpec(**values)


def _read_prompt(
    path_text: str, base_dir: Path, where: str, field: str = "compression_prompt_file"
) -> str:
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfilesError(
            f"{where}: {field}: cannot read {str(path)!r} ({exc.__class__.__name__})"
        ) from None
    if not text.strip():
        raise ProfilesError(f"{where}: {field}: {str(path)!r} is empty")
    if len(text) > MAX_PROMPT_CHARS:
        raise ProfilesError(
            f"{where}: {field}: {str(path)!r} is over {MAX_PROMPT_CHARS} characters"
        )
    return text


def _resolve(
    profile_id: str, spec: ProfileSpec, settings: Settings, base_dir: Path, where: str
) -> Profile:
    prompt = (
        _read_prompt(spec.compression_prompt_file, base_dir, where)
        if spec.compression_prompt_file
        else default_summary_prompt()
    )
    if spec.system_prompt and spec.system_prompt_file:
        raise ProfilesError(
            f"{where}: system_prompt_file: give system_prompt or the file, not both"
        )
    system_prompt = (
        _read_prompt(spec.system_prompt_file, base_dir, where, "system_prompt_file")
        if spec.system_prompt_file
        else spec.system_prompt
    )
    if not (system_prompt and system_prompt.strip()):  # the profile's own replaces it
        system_prompt = _default_system_prompt(spec, settings)
    model = spec.model or settings.ollama_model
    return Profile(
        id=profile_id,
        context_window=spec.context_window or settings.ollama_num_ctx,
        keep_recent=spec.compression_keep_recent or settings.context_keep_recent,
        summary_max_tokens=spec.compression_max_tokens or settings.context_summary_max_tokens,
        summary_prompt=prompt,
        model=model,
        summary_model=spec.summary_model or model,
        vision=bool(spec.vision),
        context_mode=spec.context_mode or "compress",
        max_history_messages=spec.max_history_messages or 16,
        reply_lang=spec.reply_lang or "auto",
        tools=tuple(spec.tools) if spec.tools is not None else None,
        options=dict(spec.options) if spec.options else None,
        think=spec.think,
        critical_tools=tuple(spec.critical_tools or ()),
        system_prompt=system_prompt.strip() if system_prompt and system_prompt.strip() else None,
    )


def _field_error(message: str) -> str:
    # msgspec: "Expected `int` >= 1 - at `$.compression_keep_recent`" → "compression_keep_recent: …"
    text, sep, path = message.rpartition(" - at `$")
    if not sep:
        return message
    field = path.rstrip("`").lstrip(".")
    return f"{field}: {text}" if field else text


def load_profiles(settings: Settings) -> Profiles:
    """Built-in profiles merged with ``settings.profiles_file`` (when set)."""
    specs = dict(BUILTIN_PROFILES)
    base_dir = Path.cwd()
    label = "NAVI_PROFILES_FILE"
    if settings.profiles_file:
        path = Path(settings.profiles_file).expanduser()
        label = f"NAVI_PROFILES_FILE={str(path)!r}"
        base_dir = path.resolve().parent
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ProfilesError(f"{label}: cannot read the file ({exc.strerror or exc})") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProfilesError(f"{label}: not valid JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise ProfilesError(f"{label}: expected a JSON object mapping profile ids to profiles")
        for profile_id, body in raw.items():
            if not profile_id.strip() or len(profile_id) > 200:
                raise ProfilesError(f"{label}: profile id {profile_id!r}: 1-200 characters")
            if not isinstance(body, dict):
                raise ProfilesError(f"{label}: profile {profile_id!r}: expected a JSON object")
            try:
                spec = msgspec.convert(body, ProfileSpec)
            except msgspec.ValidationError as exc:
                raise ProfilesError(
                    f"{label}: profile {profile_id!r}: {_field_error(str(exc))}"
                ) from None
            specs[profile_id] = _merge(specs.get(profile_id, ProfileSpec()), spec)
    resolved = {
        pid: _resolve(pid, spec, settings, base_dir, f"{label}: profile {pid!r}")
        for pid, spec in specs.items()
    }
    return Profiles(resolved)
