"""EMBEDDING_PROVIDER and the effective vector dimension (settings.vector_dim)."""

from pathlib import Path

import pytest

from app.config import LOCAL_EMBEDDING_DIM, Settings, SettingsError, load_settings


def _load(env: dict[str, str], tmp_path: Path) -> Settings:
    return load_settings(env, dotenv=tmp_path / "missing")


def test_default_is_ollama_with_768(tmp_path: Path) -> None:
    s = _load({}, tmp_path)
    assert s.embedding_provider == "ollama" and s.embedding_dim is None and s.vector_dim == 768


@pytest.mark.parametrize(
    ("env", "provider", "dim"),
    [
        ({"EMBEDDING_PROVIDER": "local"}, "local", LOCAL_EMBEDDING_DIM),
        ({"EMBEDDING_PROVIDER": "LOCAL", "EMBEDDING_DIM": "384"}, "local", 384),
        ({"EMBEDDING_PROVIDER": "local", "EMBEDDING_DIM": ""}, "local", 384),
        ({"EMBEDDING_PROVIDER": "none"}, "none", 768),
        ({"EMBEDDING_PROVIDER": "ollama", "EMBEDDING_DIM": "1024"}, "ollama", 1024),
        ({"EMBEDDING_DIM": "384"}, "ollama", 384),
    ],
)
def test_vector_dim_follows_the_provider(
    env: dict[str, str], provider: str, dim: int, tmp_path: Path
) -> None:
    s = _load(env, tmp_path)
    assert s.embedding_provider == provider and s.vector_dim == dim


def test_local_with_another_dimension_fails_naming_both_variables(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        _load({"EMBEDDING_PROVIDER": "local", "EMBEDDING_DIM": "768"}, tmp_path)
    message = str(info.value)
    assert "EMBEDDING_DIM" in message and "EMBEDDING_PROVIDER" in message and "384" in message


def test_unknown_provider_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="EMBEDDING_PROVIDER"):
        _load({"EMBEDDING_PROVIDER": "openai"}, tmp_path)


def test_vector_dim_without_env() -> None:
    assert Settings(embedding_provider="local").vector_dim == 384
    assert Settings(embedding_dim=512).vector_dim == 512
    assert Settings().vector_dim == 768
