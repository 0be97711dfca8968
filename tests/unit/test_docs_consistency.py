"""What the docs name must exist: a log event a page tells the operator to look for is one
the code logs (issue 43: docs/raw-history.md named `memory.chunk_index_failed`, the code
logs `compressor.chunk_index_failed`), and each package's one version number is the one
CHANGELOG.md's heading for that package gives."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
FILE_SUFFIX = re.compile(r"\.(py|md|json|txt|sh|toml|ini|ya?ml|html|js|mjs|ts|cfg|conf)$")


@cache
def _code() -> tuple[frozenset[str], frozenset[str]]:
    """The event names the code logs (a log call's first argument, `a.b`), and every
    other name a doc may write as `a.b`: the string constants of app/ (an event passed
    to a helper that logs it, a job's name), its modules and packages dotted from app,
    and `module.name` for the names a module defines at its top level."""
    events: set[str] = set()
    names: set[str] = set()
    for path in sorted(APP.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parts = [p for p in path.relative_to(ROOT).with_suffix("").parts if p != "__init__"]
        names.update(".".join(parts[i : i + 2]) for i in range(len(parts) - 1))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LOG_METHODS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", node.args[0].value)
            ):
                events.add(node.args[0].value)
        for node in tree.body:
            defined: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined = [node.name]
            elif isinstance(node, ast.Assign):
                defined = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined = [node.target.id]
            names.update(f"{parts[-1]}.{name}" for name in defined)
    return frozenset(events), frozenset(names)


def test_every_log_event_the_docs_name_is_logged() -> None:
    events, names = _code()
    prefixes = {e.split(".")[0] for e in events}
    assert "compressor" in prefixes and "compressor.chunk_index_failed" in events
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    unknown = [
        f"{page.relative_to(ROOT)}: `{token}`"
        for page in pages
        for token in sorted(set(re.findall(r"`([a-z_]+\.[a-z_]+)`", page.read_text())))
        if token.split(".")[0] in prefixes  # a logger's namespace: an event's name
        and token not in events
        and token not in names
        and not FILE_SUFFIX.search(token)
    ]
    assert not unknown, f"names the docs give as log events that the code has nowhere: {unknown}"


def _changelog_version(package: str) -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    found = re.findall(rf"^## {re.escape(package)} (\S+)", text, flags=re.M)
    assert found, f"CHANGELOG.md has no heading for {package}"
    return found[0]  # the newest comes first


def test_one_version_per_package_and_the_changelog_heads_it() -> None:
    from app import __version__  # here: an import error would hide the docs test too

    # the service: app.__version__, which pyproject.toml reads (no version of its own)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert _changelog_version("navi") == __version__
    # the Python client: _core.VERSION, which its pyproject.toml reads (hatch)
    client = ROOT / "clients" / "python"
    core = (client / "src" / "navi_client" / "_core.py").read_text(encoding="utf-8")
    (py_version,) = re.findall(r'^VERSION = "([^"]+)"', core, flags=re.M)
    toml = tomllib.loads((client / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in toml["project"] and "version" in toml["project"]["dynamic"]
    assert toml["tool"]["hatch"]["version"]["path"] == "src/navi_client/_core.py"
    assert _changelog_version("navi-client (Python)") == py_version
    # the TypeScript client: package.json, and its lock file agrees
    ts = ROOT / "clients" / "typescript"
    ts_version = json.loads((ts / "package.json").read_text())["version"]
    lock = json.loads((ts / "package-lock.json").read_text())
    assert lock["version"] == ts_version == lock["packages"][""]["version"]
    assert _changelog_version("navi-client (TypeScript)") == ts_version
