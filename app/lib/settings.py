"""How a settings dataclass is declared and read from the environment (`app/config.py` uses it).

A setting is one dataclass field declared with `setting()`: the annotation gives its type,
the call its env var, default, bounds or choices and meaning. `specs()` reads those
declarations back (for the loader, the docs generator and the tests); `values_from_env()`
parses the variables that are set and names the variable in every error.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SettingsError(ValueError):
    """A setting has a value we cannot use; the message names the variable."""


def setting(
    env: str,
    default: T,
    *,
    doc: str,
    ge: float | None = None,
    le: float | None = None,
    choices: tuple[str, ...] | None = None,
    secret: bool = False,
) -> T:
    """Declare a dataclass field read from `env`: its default, inclusive bounds (numbers),
    allowed values (strings, matched case-insensitively, stored lower-case) and meaning.
    A secret is left out of `repr`. The annotation gives the type; `X | None` allows unset."""
    meta = {"env": env, "doc": doc, "ge": ge, "le": le, "choices": choices}
    return field(default=default, repr=not secret, metadata=meta)


@dataclass(frozen=True)
class Spec:
    """One setting as `setting()` declared it, with its type (`int | None` gives `int`)."""

    env: str
    default: Any
    kind: type
    doc: str
    ge: float | None = None
    le: float | None = None
    choices: tuple[str, ...] | None = None


def specs(cls: type) -> dict[str, Spec]:
    """Field name -> Spec of a dataclass whose every field is declared with `setting()`."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Spec] = {}
    for f in fields(cls):
        if "env" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} must be declared with setting()")
        hint = hints[f.name]
        kind = next(t for t in typing.get_args(hint) or (hint,) if t is not type(None))
        out[f.name] = Spec(default=f.default, kind=kind, **f.metadata)
    return out


def parse(spec: Spec, raw: str) -> Any:
    """`raw` as the setting's type, within its bounds or choices; else SettingsError."""
    raw = raw.strip()
    if spec.kind is bool:
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        if raw == "" and spec.default is None:
            return None
        raise SettingsError(f"{spec.env}={raw!r}: expected true or false")
    if spec.kind in (int, float):
        try:
            value = spec.kind(raw)
        except ValueError:
            raise SettingsError(
                f"{spec.env}={raw!r}: expected {'an integer' if spec.kind is int else 'a number'}"
            ) from None
        if spec.ge is not None and value < spec.ge:
            raise SettingsError(f"{spec.env}={raw!r}: must be ≥ {spec.ge:g}")
        if spec.le is not None and value > spec.le:
            raise SettingsError(f"{spec.env}={raw!r}: must be ≤ {spec.le:g}")
        return value
    if spec.choices and raw.lower() not in spec.choices:
        raise SettingsError(f"{spec.env}={raw!r}: expected one of {', '.join(spec.choices)}")
    return raw.lower() if spec.choices else raw


def values_from_env(fields_: dict[str, Spec], env: typing.Mapping[str, str]) -> dict[str, Any]:
    """Field name -> parsed value of every setting whose variable is set in `env`. An empty
    value counts as unset, except for a string setting (where it is a value: `''`)."""
    return {
        name: parse(spec, env[spec.env])
        for name, spec in fields_.items()
        if spec.env in env and (env[spec.env] != "" or spec.kind is str)
    }


def read_dotenv(path: Path) -> dict[str, str]:
    """Minimal `.env` reader: KEY=VALUE lines, `#` comments, optional quotes."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip().removeprefix("export ").strip()
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key] = value
    return out
