import dataclasses
import re
from pathlib import Path

import pytest

from app.config import FIELDS, Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[3]


def test_defaults_match_the_table() -> None:
    s = Settings()
    for name, spec in FIELDS.items():
        assert getattr(s, name) == spec.default, name


def test_env_values_are_parsed(tmp_path: Path) -> None:
    s = load_settings(
        {
            "PORT": "9000",
            "NAVI_AUTH_ENABLED": "false",
            "CONTEXT_COMPRESSION_THRESHOLD": "0.8",
            "EMBEDDING_OLLAMA_HOST": "",
        },
        dotenv=tmp_path / "missing",
    )
    assert s.port == 9000 and s.auth_enabled is False and s.context_compression_threshold == 0.8
    assert s.embed_host == s.ollama_host  # falls back to OLLAMA_HOST


def test_dotenv_is_read_and_env_wins(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("# comment\nPORT=7000\nOLLAMA_HOST='http://x:1'\nexport LOG_LEVEL=debug\n")
    s = load_settings({"PORT": "7001"}, dotenv=env)
    assert s.port == 7001 and s.ollama_host == "http://x:1" and s.log_level == "debug"


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"PORT": "eighty"}, "PORT"),
        ({"PORT": "70000"}, "PORT"),
        ({"NAVI_AUTH_ENABLED": "maybe"}, "NAVI_AUTH_ENABLED"),
        ({"CONTEXT_COMPRESSION_THRESHOLD": "1.5"}, "CONTEXT_COMPRESSION_THRESHOLD"),
        ({"CONTEXT_COMPRESSION_TARGET": "0.95"}, "CONTEXT_COMPRESSION_TARGET"),
        ({"DATABASE_URL": "mysql://x"}, "DATABASE_URL"),
        ({"NAVI_ADMIN_TOKEN": "short"}, "NAVI_ADMIN_TOKEN"),
        ({"OLLAMA_HOST": "localhost:11434"}, "OLLAMA_HOST"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], needle: str, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=needle):
        load_settings(env, dotenv=tmp_path / "missing")


def test_secrets_not_in_repr() -> None:
    s = dataclasses.replace(Settings(), admin_token="x" * 40, embedding_ollama_api_key="secret")
    assert "x" * 40 not in repr(s) and "secret" not in repr(s)


def test_configuration_doc_lists_every_setting() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for name, spec in FIELDS.items():
        row = re.search(rf"^\|\s*`{name}`\s*\|\s*`{spec.env}`\s*\|(.+)$", doc, re.M)
        assert row, f"docs/configuration.md lacks a row for {name} / {spec.env}"
