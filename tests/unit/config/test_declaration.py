"""The one declaration of every setting (`setting()` fields of `Settings`) and its view."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from app.config import FIELDS, Settings, load_settings
from app.lib.settings import SettingsError, setting, specs, values_from_env


@pytest.mark.parametrize("name", list(FIELDS))
def test_every_default_is_a_value_its_variable_accepts(name: str, tmp_path: Path) -> None:
    spec = FIELDS[name]
    if spec.default is None:
        return  # unset: the derived property decides
    assert isinstance(spec.default, spec.kind), name
    if spec.ge is not None:
        assert spec.default >= spec.ge, name
    if spec.le is not None:
        assert spec.default <= spec.le, name
    if spec.choices:
        assert spec.default in spec.choices, name
    raw = str(spec.default).lower() if spec.kind is bool else str(spec.default)
    loaded = load_settings({spec.env: raw}, dotenv=tmp_path / "missing")
    assert getattr(loaded, name) == spec.default == getattr(Settings(), name)


def test_the_type_comes_from_the_annotation() -> None:
    assert FIELDS["port"].kind is int and FIELDS["embedding_dim"].kind is int
    assert FIELDS["log_json"].kind is bool and FIELDS["ollama_timeout"].kind is float


def test_a_field_without_setting_is_refused() -> None:
    @dataclass(frozen=True)
    class Half:
        a: int = setting("A", 1, doc="declared")
        b: int = 2

    with pytest.raises(TypeError, match="Half.b"):
        specs(Half)


def test_a_custom_declaration_loads_and_checks_its_bounds() -> None:
    @dataclass(frozen=True)
    class Small:
        n: int = setting("SMALL_N", 3, ge=1, le=5, doc="n")
        mode: str = setting("SMALL_MODE", "a", choices=("a", "b"), doc="mode")

    fields = specs(Small)
    assert Small(**values_from_env(fields, {"SMALL_N": "4", "SMALL_MODE": "B"})) == Small(4, "b")
    with pytest.raises(SettingsError, match=r"SMALL_N='9': must be ≤ 5"):
        values_from_env(fields, {"SMALL_N": "9"})
