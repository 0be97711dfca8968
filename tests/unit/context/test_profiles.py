import json
from pathlib import Path

import pytest

from app.config import Settings, SettingsError
from app.domain.kernel.profiles import (
    ProfilesError,
    default_summary_prompt,
    load_profiles,
    memory_guidance,
)


def _file(tmp_path: Path, body: object) -> str:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(body) if not isinstance(body, str) else body)
    return str(path)


def test_builtin_defaults_follow_the_settings() -> None:
    s = Settings(ollama_num_ctx=8192, context_keep_recent=5, context_summary_max_tokens=700)
    profiles = load_profiles(s)
    d = profiles.get("default")
    assert (d.context_window, d.keep_recent, d.summary_max_tokens) == (8192, 5, 700)
    assert d.model == d.summary_model == s.ollama_model and d.vision is False
    assert d.summary_prompt == default_summary_prompt() and "KEYS:" in d.summary_prompt
    assert profiles.get("code").keep_recent == 12
    assert profiles.get("code").mid_turn_keep_messages() == 24
    assert d.mid_turn_keep_messages() == 12  # max(12, 5 × 2)


def test_unknown_profile_resolves_to_default() -> None:
    profiles = load_profiles(Settings())
    assert profiles.get("nope").id == "default"
    assert profiles.get(None).id == "default"


def test_file_overrides_and_adds_profiles(tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("Summarize like a pirate.\nKEYS: at the end")
    path = _file(
        tmp_path,
        {
            "code": {"context_window": 65536, "model": "coder:1b"},
            "tiny": {
                "context_window": 4096,
                "compression_keep_recent": 2,
                "compression_max_tokens": 300,
                "compression_prompt_file": "p.txt",
                "summary_model": "small:1b",
                "vision": True,
            },
        },
    )
    profiles = load_profiles(Settings(profiles_file=path))
    code = profiles.get("code")
    assert code.context_window == 65536 and code.keep_recent == 12  # built-in field kept
    assert code.model == code.summary_model == "coder:1b"
    tiny = profiles.get("tiny")
    assert (tiny.context_window, tiny.keep_recent, tiny.summary_max_tokens) == (4096, 2, 300)
    assert tiny.summary_prompt.startswith("Summarize like a pirate")
    assert tiny.summary_model == "small:1b" and tiny.vision is True
    assert tiny.model == Settings().ollama_model
    assert profiles.ids() == ["code", "default", "tiny"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "JSON object"),
        ({"x": 3}, "profile 'x': expected a JSON object"),
        ({"x": {"context_window": "big"}}, "profile 'x': context_window"),
        ({"x": {"context_window": 10}}, "profile 'x': context_window"),
        ({"x": {"compression_keep_recent": 0}}, "compression_keep_recent"),
        ({"x": {"compression_max_tokens": -1}}, "compression_max_tokens"),
        ({"x": {"windw": 4096}}, "windw"),
        ({"x": {"compression_prompt_file": "missing.txt"}}, "compression_prompt_file"),
        ({"x": {"vision": "yes"}}, "vision"),
        ({"x": {"system_prompt_file": "missing.txt"}}, "system_prompt_file"),
        ({"x": {"system_prompt": ""}}, "system_prompt"),
        ({"x": {"system_prompt": "a" * 20_001}}, "system_prompt"),
        ({"x": {"system_prompt": "a", "system_prompt_file": "p.txt"}}, "not both"),
    ],
)
def test_bad_file_names_the_field(tmp_path: Path, body: object, needle: str) -> None:
    path = _file(tmp_path, body)
    with pytest.raises(ProfilesError, match=needle) as info:
        load_profiles(Settings(profiles_file=path))
    assert "NAVI_PROFILES_FILE" in str(info.value)
    assert isinstance(info.value, SettingsError)


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfilesError, match="cannot read"):
        load_profiles(Settings(profiles_file=str(tmp_path / "none.json")))


def test_empty_prompt_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("  \n")
    path = _file(tmp_path, {"x": {"compression_prompt_file": "empty.txt"}})
    with pytest.raises(ProfilesError, match="empty"):
        load_profiles(Settings(profiles_file=path))


def test_critical_tools(tmp_path: Path) -> None:
    path = _file(tmp_path, {"ops": {"critical_tools": ["run_tests", "build_log"]}})
    profiles = load_profiles(Settings(profiles_file=path))
    assert profiles.get("ops").critical_tools == ("run_tests", "build_log")
    assert profiles.get("default").critical_tools == ()
    bad = _file(tmp_path, {"ops": {"critical_tools": [""]}})
    with pytest.raises(ProfilesError, match="critical_tools"):
        load_profiles(Settings(profiles_file=bad))


def test_system_prompt_inline_or_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "guide.txt").write_text("  You are a guide.\n")
    body = {"a": {"system_prompt": "Be terse."}, "b": {"system_prompt_file": "guide.txt"}}
    path = _file(tmp_path, body)
    profiles = load_profiles(Settings(profiles_file=path, memory_guidance_enabled=False))
    assert profiles.get("a").system_prompt == "Be terse."
    assert profiles.get("b").system_prompt == "You are a guide."
    assert profiles.get("default").system_prompt is None


def test_a_profile_without_a_prompt_gets_the_memory_guidance(tmp_path: Path) -> None:
    body = {
        "own": {"system_prompt": "Be terse."},
        "search": {"tools": ["memory_search"]},
        "facts_only": {"tools": ["memory"]},
        "none": {"tools": []},
    }
    profiles = load_profiles(Settings(profiles_file=_file(tmp_path, body)))
    guidance = memory_guidance()
    assert "memory_search" in guidance and "start of every session" in guidance
    assert profiles.get("default").system_prompt == guidance  # every tool offered
    assert profiles.get("code").system_prompt == guidance
    assert profiles.get("search").system_prompt == guidance
    assert profiles.get("own").system_prompt == "Be terse."  # replaced whole
    assert profiles.get("facts_only").system_prompt is None  # no memory_search to guide
    assert profiles.get("none").system_prompt is None
    off = load_profiles(Settings(memory_guidance_enabled=False))
    assert off.get("default").system_prompt is None


def test_oversized_system_prompt_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 20_001)
    path = _file(tmp_path, {"x": {"system_prompt_file": "big.txt"}})
    with pytest.raises(ProfilesError, match="system_prompt_file.*over"):
        load_profiles(Settings(profiles_file=path))
